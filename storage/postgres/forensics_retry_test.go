package postgres_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestRecord_ForensicsRetried: a transaction that PostgreSQL aborts once (a
// serialization failure, as a deadlock's victim gets) in its last round trip, after
// the checks decided its flags and which rows to block, is run again from the start:
// its rows come out as if it had run once, flags neither lost nor doubled, a blocked
// row's redelivery still a duplicate of the earlier delivery with its body whole.
func TestRecord_ForensicsRetried(t *testing.T) {
	for _, table := range []string{"deliveries", "suspects"} {
		t.Run("aborted in the insert into "+table, func(t *testing.T) {
			ctx := t.Context()
			url := postgrestest.NewDatabase(t)
			db := openEngine(t, url)
			delivery := func(source, key, business string) *storage.Delivery {
				d := testDelivery(key)
				d.Source, d.BusinessKey, d.Amount = source, business, "80.00"
				return d
			}
			opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
			blocks := opt
			blocks.BusinessBlocks = true
			first := delivery("ota", "evt_1", "B")
			flagFirst := delivery("pms", "res_1", "R")
			for _, d := range []*storage.Delivery{first, flagFirst} {
				if err := db.Record(ctx, d, opt); err != nil {
					t.Fatal(err)
				}
			}
			admin := postgrestest.Connect(t, url)
			if _, err := admin.Exec(ctx, `CREATE SEQUENCE abort_once;
CREATE FUNCTION abort_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('abort_once') = 1 THEN
		RAISE EXCEPTION 'abort once' USING ERRCODE = '40001';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER abort_once BEFORE INSERT ON `+table+` FOR EACH STATEMENT EXECUTE FUNCTION abort_once()`); err != nil {
				t.Fatal(err)
			}
			again, redelivered := delivery("ota", "evt_2", "B"), delivery("ota", "evt_2", "B")
			flagged := delivery("pms", "res_2", "R")
			errs := make(chan error, 2)
			// Two requests of one transaction: queued behind a held writer.
			release, blocked := blockIntake(t, db, url)
			go func() { errs <- db.RecordBatch(ctx, []*storage.Delivery{again, redelivered}, blocks) }()
			waitFor(t, "the batch to queue", func() (bool, error) { return postgres.QueuedRecords(db) == 1, nil })
			go func() { errs <- db.Record(ctx, flagged, opt) }()
			waitFor(t, "the delivery to queue", func() (bool, error) { return postgres.QueuedRecords(db) == 2, nil })
			release()
			if err := <-blocked; err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			var n int64
			if err := admin.QueryRow(ctx, `SELECT last_value FROM abort_once`).Scan(&n); err != nil || n < 2 {
				t.Fatalf("the trigger ran %d times, %v: the transaction was not run again", n, err)
			}
			for _, d := range []*storage.Delivery{again, redelivered} {
				if d.Outcome != storage.Duplicate || d.FirstDelivery != first.ID || len(d.Suspects) != 0 {
					t.Errorf("%d = %s of %d %v, want a duplicate of %d", d.ID, d.Outcome, d.FirstDelivery, d.Suspects, first.ID)
				}
			}
			got, err := db.Delivery(ctx, redelivered.ID)
			if err != nil || !bytes.Equal(got.Body, redelivered.Body) || got.Outcome != storage.Duplicate || got.FirstDelivery != first.ID {
				t.Errorf("stored redelivery = %s of %d body %q, %v", got.Outcome, got.FirstDelivery, got.Body, err)
			}
			if _, err := db.Claim(ctx, "ota", "evt_2"); err == nil {
				t.Error("the blocked key holds a claim")
			}
			f, err := db.FlagsOf(ctx, flagged.ID)
			if err != nil || !slices.Equal(flagged.Suspects, []storage.SuspectKind{storage.SuspectBusinessKey}) || len(f.Suspects) != 1 ||
				f.Suspects[0].Other != flagFirst.ID {
				t.Errorf("flagged = %v, stored %+v, %v; want one business key suspect naming %d", flagged.Suspects, f.Suspects, err, flagFirst.ID)
			}
		})
	}
}
