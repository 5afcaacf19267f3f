package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestRollup_FenceReadIsNoHolder: one replica's roll-up in flight does not hold back
// another replica's roll-up of another kind. The fence reads the last id handed out
// with a lock that sqlIDHolders does not look for (pg_sequence_last_value would take a
// RowExclusiveLock on the sequence, the lock by which the fence recognises a
// transaction that took ids). Replica A's hourly-totals roll-up, held here after its
// fence read (the test holds the stats mark's row), must not be listed as a holder of
// delivery_ids by replica B's ledger roll-up, which folds the three committed
// duplicates.
func TestRollup_FenceReadIsNoHolder(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a, b := replica(t, url, now), replica(t, url, now)
	record := func(key string) {
		t.Helper()
		for range 2 { // the delivery and its duplicate
			if err := a.Record(ctx, refund(key), day); err != nil {
				t.Fatal(err)
			}
		}
	}
	record("first")
	if _, err := a.RollupStats(ctx, 100); err != nil { // both marks exist from here on
		t.Fatal(err)
	}
	for i := range 3 {
		record(fmt.Sprint("k", i))
	}
	hold, err := postgrestest.Connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.WithoutCancel(ctx))
	if _, err := hold.Exec(ctx, `SELECT 1 FROM delivery_stats_mark WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.RollupStats(ctx, 100); done <- err }()
	waitForLockWait(t, url) // A's stats roll-up, past its fence read, waits to move its mark

	n, err := b.RollupLedger(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("B's ledger roll-up while A's stats roll-up is in flight: folded %d duplicates, want the 3 committed", n)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
