package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// recordAcrossReplicas records ds at once, each through its own replica (a DB of its
// own on url's database), while a connection of the test's own holds table in SHARE
// mode: every recording looks its forensic keys up, then waits to store them. Only
// once all of them wait (for that lock, or for one another) is the table let go, so
// each has looked up before any committed, unless the engine makes them take turns.
func recordAcrossReplicas(t *testing.T, url, table string, opt storage.ClaimOptions, ds ...*storage.Delivery) {
	t.Helper()
	ctx := t.Context()
	replicas := make([]*postgres.DB, len(ds))
	for i := range ds {
		replicas[i] = open(t, url) // the first migrates the database
	}
	hold, err := postgrestest.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.WithoutCancel(ctx))
	if _, err := hold.Exec(ctx, `LOCK TABLE `+pgx.Identifier{table}.Sanitize()+` IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(ds))
	for i, d := range ds {
		go func() { errs <- replicas[i].Record(ctx, d, opt) }()
	}
	watch := postgrestest.Connect(t, url)
	waiting := 0
	for attempt := 0; waiting < len(ds); attempt++ {
		if attempt == 3000 {
			t.Fatalf("%d of %d recordings wait on a lock; want all", waiting, len(ds))
		}
		if attempt > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_locks
WHERE NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range ds {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecord_BusinessKeyAcrossReplicas: two replicas record a booking's event at once
// under two event ids (one business key): exactly one stands as the original, the
// other is flagged as its double or, with business_key_blocks, is its duplicate; never
// are both originals.
func TestRecord_BusinessKeyAcrossReplicas(t *testing.T) {
	for _, blocks := range []bool{false, true} {
		t.Run(map[bool]string{false: "Flags", true: "Blocks"}[blocks], func(t *testing.T) {
			url := postgrestest.NewDatabase(t)
			opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour, BusinessBlocks: blocks}
			a, b := businessDelivery("evt_a", "B"), businessDelivery("evt_b", "B")
			recordAcrossReplicas(t, url, "business_keys", opt, a, b)

			db := open(t, url)
			var originals, doubles []*storage.Delivery
			for _, d := range []*storage.Delivery{a, b} {
				f, err := db.FlagsOf(t.Context(), d.ID)
				if err != nil {
					t.Fatal(err)
				}
				own := slices.DeleteFunc(f.Suspects, func(s storage.Suspect) bool { return s.Delivery != d.ID })
				if d.Outcome == storage.Accepted && len(own) == 0 {
					originals = append(originals, d)
				} else {
					doubles = append(doubles, d)
				}
			}
			if len(originals) != 1 {
				t.Fatalf("%d originals (a: %s %v, b: %s %v), want exactly one",
					len(originals), a.Outcome, a.Suspects, b.Outcome, b.Suspects)
			}
			first, double := originals[0], doubles[0]
			if blocks {
				stored, err := db.Delivery(t.Context(), double.ID)
				if double.Outcome != storage.Duplicate || double.FirstDelivery != first.ID || err != nil ||
					stored.Outcome != storage.Duplicate || stored.FirstDelivery != first.ID {
					t.Fatalf("blocked = %s of %d (stored %+v, %v), want a duplicate of %d",
						double.Outcome, double.FirstDelivery, stored.Outcome, err, first.ID)
				}
				if _, err := db.Claim(t.Context(), "ota", double.Key); err == nil {
					t.Error("the blocked key holds a claim")
				}
				return
			}
			f, err := db.FlagsOf(t.Context(), double.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%s %v %d", double.Outcome, double.Suspects, len(f.Suspects)); got != "accepted [business_key] 1" ||
				f.Suspects[0].Other != first.ID {
				t.Fatalf("double = %s, suspects %+v; want accepted, flagged a double of %d", got, f.Suspects, first.ID)
			}
		})
	}
}

// TestRecord_CorrelationAcrossReplicas: two sources of a correlation rule deliver the
// same refund at once, through two replicas: exactly one of them is flagged, naming
// the other.
func TestRecord_CorrelationAcrossReplicas(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	refund := func(source, key string) *storage.Delivery {
		d := businessDelivery(key, "")
		d.Source = source
		d.Correlations = []storage.CorrelationKey{{Rule: "double-refund", Hash: "R", Window: time.Hour}}
		return d
	}
	a, b := refund("ota", "evt_1"), refund("psp", "pay_1")
	recordAcrossReplicas(t, url, "correlation_keys", storage.ClaimOptions{TTL: time.Hour}, a, b)
	flagged, other := a, b
	if len(a.Suspects) == 0 {
		flagged, other = b, a
	}
	if !slices.Equal(flagged.Suspects, []storage.SuspectKind{storage.SuspectCorrelation}) || len(other.Suspects) != 0 {
		t.Fatalf("suspects: %s %v, %s %v; want exactly one flagged", a.Source, a.Suspects, b.Source, b.Suspects)
	}
	f, err := open(t, url).FlagsOf(t.Context(), flagged.ID)
	if err != nil || len(f.Suspects) != 1 || f.Suspects[0].Other != other.ID || f.Suspects[0].OtherSource != other.Source {
		t.Fatalf("flags of %d = %+v, %v; want one naming %d of %s", flagged.ID, f.Suspects, err, other.ID, other.Source)
	}
}

// businessDelivery is an accepted-to-be delivery of source ota with event id key and
// business key hash business.
func businessDelivery(key, business string) *storage.Delivery {
	return &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h-" + key,
		Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json", BusinessKey: business,
		Booking: "BK-1", Amount: "80.00", Currency: "EUR"}
}
