package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// replica opens another DB on the database at url, as another replica would, with the
// clock at now and a busy timeout long enough for a write that the test holds up.
func replica(t *testing.T, url string, now time.Time) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(t.Context(), url, postgres.Options{BusyTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.Now = func() time.Time { return now }
	return db
}

// refund is a delivery of key carrying 10.00 EUR.
func refund(key string) *storage.Delivery {
	return &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{"id":"` + key + `"}`), Amount: "10.00", Currency: "EUR"}
}

// TestRollup_OutOfOrderCommit: replica A takes a delivery id, and its transaction
// commits only after replica B has committed deliveries with higher ids and rolled them
// up. A's delivery is still counted, once, by the hourly totals and by the ledger: a
// roll-up never moves its mark past an id whose transaction may still commit.
func TestRollup_OutOfOrderCommit(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a, b := replica(t, url, now), replica(t, url, now)
	day := storage.ClaimOptions{TTL: 24 * time.Hour}
	if err := a.Record(ctx, refund("slow"), day); err != nil {
		t.Fatal(err)
	}

	// Hold the claim of "slow" from a connection of the test's own: A's duplicate of
	// it takes its id, then waits on the claim's row.
	conn := postgrestest.Connect(t, url)
	hold, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.WithoutCancel(ctx))
	if _, err := hold.Exec(ctx, `SELECT 1 FROM claims WHERE source = 'ota' AND key = 'slow' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	slow := refund("slow")
	done := make(chan error, 1)
	go func() { done <- a.Record(ctx, slow, day) }()
	waitForLockWait(t, url)

	// B stores deliveries after A's id, each with its duplicate, and rolls them up.
	for i := range 3 {
		for range 2 {
			if err := b.Record(ctx, refund(fmt.Sprint("fast-", i)), day); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := b.RollupStats(ctx, 100); err != nil {
		t.Fatal(err)
	}
	// 7 deliveries committed, 3 of them duplicates; A's is not committed yet.
	check(t, b, now, 7, 3)

	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if slow.Outcome != storage.Duplicate {
		t.Fatalf("the held-up delivery is %s, want a duplicate", slow.Outcome)
	}
	check(t, b, now, 8, 4)
	for i := 0; ; i++ {
		n, err := b.RollupStats(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if i == 10 {
			t.Fatal("the roll-up does not catch up")
		}
	}
	if n, err := b.RollupLedger(ctx, 100); err != nil || n != 0 {
		t.Fatalf("ledger roll-up after RollupStats: %d %v, want it caught up", n, err)
	}
	// Rolled up, the tails are empty: the totals alone count A's delivery.
	check(t, b, now, 8, 4)
	check(t, a, now, 8, 4)
}

// check fails t unless db's hourly totals count deliveries deliveries and its ledger
// dups duplicates of 10.00 EUR caught.
func check(t *testing.T, db *postgres.DB, now time.Time, deliveries, dups int64) {
	t.Helper()
	stats, err := db.DeliveryStats(t.Context(), now.Add(-time.Hour), now.Add(time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range stats {
		n += s.Deliveries
	}
	l, err := db.Ledger(t.Context(), storage.LedgerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var caught storage.Money
	for _, r := range l.Totals {
		caught.Add(r.Caught)
	}
	if n != deliveries || caught != (storage.Money{Count: dups, Minor: dups * 1000}) {
		t.Fatalf("stats count %d deliveries, the ledger %+v caught; want %d and %d of 10.00", n, caught, deliveries, dups)
	}
}

// waitForLockWait waits until a session of the database at url waits on a lock that
// another holds.
func waitForLockWait(t *testing.T, url string) {
	t.Helper()
	conn := postgrestest.Connect(t, url)
	for range 6000 {
		var waiting bool
		err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted)`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no session waits on the held lock")
}

// TestRollups_LockHeld: while another replica holds a roll-up's advisory lock, the
// roll-up folds nothing and reports 0 without an error (that replica is rolling up);
// once the lock is free it folds.
func TestRollups_LockHeld(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	db := replica(t, url, now)
	for range 2 {
		if err := db.Record(ctx, refund("k"), storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		lock   int64
		rollup func() (int, error)
		want   int
	}{
		// The ledger first: RollupStats rolls the ledger up too.
		{"Ledger", postgres.RollupLedgerLock, func() (int, error) { return db.RollupLedger(ctx, 10) }, 1},
		{"Stats", postgres.RollupStatsLock, func() (int, error) { return db.RollupStats(ctx, 10) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := postgrestest.Connect(t, url)
			if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, postgres.LockID(db, tc.lock)); err != nil {
				t.Fatal(err)
			}
			if n, err := tc.rollup(); err != nil || n != 0 {
				t.Fatalf("roll-up while another replica holds its lock: %d %v, want 0 and no error", n, err)
			}
			if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, postgres.LockID(db, tc.lock)); err != nil {
				t.Fatal(err)
			}
			if n, err := tc.rollup(); err != nil || n != tc.want {
				t.Fatalf("roll-up once the lock is free: %d %v, want %d", n, err, tc.want)
			}
		})
	}
}
