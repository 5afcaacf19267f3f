package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// sweepAll walks the retention sweep to its end, limit deliveries a batch, and returns
// how many it deleted. It fails the test if a batch deletes more than limit, or if the
// walk takes more batches than deliveries exist.
func sweepAll(t *testing.T, db *sqlite.DB, cutoff time.Time, limit int) int64 {
	t.Helper()
	var total int64
	var from storage.SweepCursor
	for range 1000 {
		n, next, err := db.SweepDeliveries(context.Background(), db.Now(), cutoff, from, limit)
		if err != nil {
			t.Fatal(err)
		}
		if n > int64(limit) {
			t.Fatalf("one batch of %d deleted %d", limit, n)
		}
		total += n
		if next.Done() {
			return total
		}
		from = next
	}
	t.Fatal("the retention sweep did not reach its end in 1000 batches")
	return 0
}

// handOff records one attempt of key's job as the dispatcher would, with result res.
func handOff(t *testing.T, db *sqlite.DB, key string, res storage.AttemptResult) {
	t.Helper()
	ctx := context.Background()
	jobs, err := db.LeaseDue(ctx, db.Now(), time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Key == key {
			a := storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery, StartedAt: db.Now(), Error: res.LastError}
			if moved, err := db.FinishAttempt(ctx, j, a, res); err != nil || !moved {
				t.Fatalf("finish attempt of %s: moved %v, %v", key, moved, err)
			}
			return
		}
	}
	t.Fatalf("no job due for %s", key)
}

// retentionFixture is a database holding a delivery of each kind that retention must
// keep or may delete, received two hours before its clock's now.
type retentionFixture struct {
	db          *sqlite.DB
	clk         *storagetest.Clock
	kept, swept map[string]*storage.Delivery
}

func newRetentionFixture(t *testing.T) retentionFixture {
	t.Helper()
	db := storagetest.Open(t)
	clk := newClock(db)
	dispatch := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}
	f := retentionFixture{db: db, clk: clk, kept: map[string]*storage.Delivery{}, swept: map[string]*storage.Delivery{}}

	// Owed: unsettled, or handed downstream and still held (a reprocess resends it).
	f.kept["processing"] = storagetest.Record(t, db, delivery("ota", "processing", "h1"), dispatch)
	f.kept["failed"] = storagetest.Record(t, db, delivery("ota", "failed", "h"), dispatch)
	handOff(t, db, "failed", storage.AttemptResult{Failed: true, LastError: "downstream answered 500"})
	f.kept["handed"] = storagetest.Record(t, db, delivery("ota", "handed", "h"), dispatch)
	handOff(t, db, "handed", storage.AttemptResult{Done: true})

	// Not owed: the key expired or was released, it was never to be handed downstream,
	// or the delivery is not the one a claim names.
	f.swept["handed-expired"] = storagetest.Record(t, db, delivery("ota", "handed-expired", "h"),
		storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	handOff(t, db, "handed-expired", storage.AttemptResult{Done: true})
	f.swept["released"] = storagetest.Record(t, db, delivery("ota", "released", "h"), dispatch)
	handOff(t, db, "released", storage.AttemptResult{Done: true})
	if _, err := db.ReleaseKey(context.Background(), storage.Release{Source: "ota", Key: "released", Actor: "t", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	f.swept["record-only"] = storagetest.Record(t, db, delivery("ota", "record-only", "h"), day)
	f.swept["duplicate"] = storagetest.Record(t, db, delivery("ota", "processing", "h2"), dispatch)
	f.swept["rejected"] = storagetest.Record(t, db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401,
		Error: "signature does not match", Body: []byte(`{}`)}, day)

	clk.Add(2 * time.Hour)
	// Within retention: kept whatever its key.
	f.kept["recent"] = storagetest.Record(t, db, delivery("ota", "recent", "h"), day)
	return f
}

func (f retentionFixture) sweep(t *testing.T) int64 {
	t.Helper()
	// Two a batch: the walk steps over the owed deliveries among those it may delete.
	return sweepAll(t, f.db, f.clk.Now().Add(-time.Hour), 2)
}

// TestDB_SweepDeliveries_KeepsOwedPayloads: retention shorter than the time a key
// stays unsettled, or than its ttl, never deletes the payload its claim still owes
// downstream, and still deletes everything else past retention.
func TestDB_SweepDeliveries_KeepsOwedPayloads(t *testing.T) {
	ctx := context.Background()
	f := newRetentionFixture(t)
	if n := f.sweep(t); n != int64(len(f.swept)) {
		t.Errorf("swept %d deliveries, want %d", n, len(f.swept))
	}
	for name, d := range f.kept {
		got, err := f.db.Delivery(ctx, d.ID)
		if err != nil || string(got.Body) != string(d.Body) {
			t.Errorf("%s (delivery %d): %v, body %q; want kept with %q", name, d.ID, err, got.Body, d.Body)
		}
	}
	for name, d := range f.swept {
		if _, err := f.db.Delivery(ctx, d.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("%s (delivery %d): %v, want swept", name, d.ID, err)
		}
	}

	// Once the handed-off key's ttl is over, nothing is owed for it any more.
	f.clk.Add(24 * time.Hour)
	if n := f.sweep(t); n != 2 {
		t.Errorf("a day later swept %d, want 2 (the handed-off key's payload and the recent one)", n)
	}
	if _, err := f.db.Delivery(ctx, f.kept["handed"].ID); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("handed-off key past its ttl: %v, want swept", err)
	}
	for _, name := range []string{"processing", "failed"} {
		if _, err := f.db.Delivery(ctx, f.kept[name].ID); err != nil {
			t.Errorf("%s, a day later: %v; unsettled keys keep their payload", name, err)
		}
	}
}

// TestDB_ReleaseKey_PayloadGone: a key whose payload retention removed cannot be
// reprocessed, and says why; it can still be released.
func TestDB_ReleaseKey_PayloadGone(t *testing.T) {
	ctx := context.Background()
	f := newRetentionFixture(t)
	f.sweep(t)
	reprocess := storage.Release{Source: "ota", Actor: "sam", Reason: "downstream lost it", Reprocess: true,
		StuckBefore: f.clk.Now().Add(-10 * time.Minute)}

	for _, key := range []string{"released", "handed-expired", "record-only"} {
		before, err := f.db.Claim(ctx, "ota", key)
		if err != nil {
			t.Fatal(err)
		}
		r := reprocess
		r.Key = key
		_, err = f.db.ReleaseKey(ctx, r)
		if !errors.Is(err, storage.ErrPayloadGone) || !strings.Contains(err.Error(), "no longer stored") ||
			!strings.Contains(err.Error(), "release the key instead") {
			t.Errorf("reprocess %s: %v; want ErrPayloadGone saying why and what to do", key, err)
		}
		if after, _ := f.db.Claim(ctx, "ota", key); after.State != before.State {
			t.Errorf("refused reprocess of %s moved it from %s to %s", key, before.State, after.State)
		}
	}
	log, err := f.db.AuditLog(ctx, 0, 100)
	if err != nil || len(log) != 1 || log[0].Key != "released" {
		t.Fatalf("audit log %+v, %v; want only the fixture's release", log, err)
	}

	r := reprocess
	r.Key = "handed"
	if res, err := f.db.ReleaseKey(ctx, r); err != nil || !res.Changed {
		t.Fatalf("reprocess of a held key: %+v, %v", res, err)
	}
	r = reprocess
	r.Key, r.Reprocess = "record-only", false
	if res, err := f.db.ReleaseKey(ctx, r); err != nil || !res.Changed {
		t.Fatalf("release of a key without its payload: %+v, %v", res, err)
	}
}

// TestDB_DeliveryIDsNeverReused: an id, once issued, is never issued again, not once
// the deliveries table has emptied, and not across a reopen.
func TestDB_DeliveryIDsNeverReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	open := func() (*sqlite.DB, *storagetest.Clock) {
		db, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db, newClock(db)
	}
	db, clk := open()
	a := storagetest.Record(t, db, delivery("ota", "a", "h"), day)
	clk.Add(2 * time.Hour)
	if n := sweepAll(t, db, clk.Now().Add(-time.Hour), 100); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	b := storagetest.Record(t, db, delivery("ota", "b", "h"), day)
	if b.ID <= a.ID {
		t.Fatalf("after the table emptied a new delivery got id %d; %d was issued before", b.ID, a.ID)
	}
	clk.Add(2 * time.Hour)
	if n := sweepAll(t, db, clk.Now().Add(-time.Hour), 100); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, _ = open()
	defer db.Close()
	c := storagetest.Record(t, db, delivery("ota", "c", "h"), day)
	if c.ID <= b.ID {
		t.Fatalf("after a reopen a new delivery got id %d; %d was issued before", c.ID, b.ID)
	}
}

// TestDB_DeliveryIDsMigrate: a database from before the id sequence keeps its ids, and
// its new deliveries start above every id it still names, also those whose deliveries
// were swept (a claim, an attempt or the dashboard's rollup mark may name them).
func TestDB_DeliveryIDsMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := storagetest.Record(t, db, delivery("ota", "x", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	y := storagetest.Record(t, db, delivery("ota", "y", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the schema of before the sequence, with deliveries swept that a claim, an
	// attempt and the rollup mark still name.
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TABLE IF EXISTS delivery_seq`,
		`DELETE FROM migrations WHERE name LIKE '%0006_%'`,
		`UPDATE claims SET first_delivery = 41 WHERE key = 'x'`,
		`INSERT INTO attempts (source, key, delivery, started_at, duration_ms) VALUES ('ota', 'x', 37, 1, 1)`,
		`UPDATE delivery_stats_mark SET rolled_up_to = 29`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	z := storagetest.Record(t, db, delivery("ota", "z", "h"), day)
	if z.ID != 42 {
		t.Fatalf("first delivery after the upgrade got id %d, want 42 (above the 41 a claim names)", z.ID)
	}
	for _, d := range []*storage.Delivery{x, y} {
		if got, err := db.Delivery(ctx, d.ID); err != nil || got.Key != d.Key {
			t.Fatalf("delivery %d after the upgrade: %+v, %v; want %s kept under its id", d.ID, got, err, d.Key)
		}
	}
}
