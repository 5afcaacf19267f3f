package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestSweeps_LockHeld: while another replica holds a sweep's advisory lock, the sweep
// deletes nothing and reports 0 without an error (that replica is doing the work); once
// the lock is free it deletes.
func TestSweeps_LockHeld(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	db := openEngine(t, url)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ResolveAlert(ctx, a.ID, "", now); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRejectionCounts(ctx, []storage.RejectionCount{{Source: "ota", Status: 401, Minute: now, Rejections: 1}}); err != nil {
		t.Fatal(err)
	}
	cutoff := now.Add(time.Hour)

	for _, tc := range []struct {
		name  string
		lock  int64
		sweep func() (int64, error)
	}{
		{"Alerts", postgres.SweepAlertsLock, func() (int64, error) { return db.SweepAlerts(ctx, cutoff, 10) }},
		{"RejectionCounts", postgres.SweepRejectionsLock, func() (int64, error) { return db.SweepRejectionCounts(ctx, cutoff, 10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := postgrestest.Connect(t, url)
			if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, postgres.LockID(db, tc.lock)); err != nil {
				t.Fatal(err)
			}
			if n, err := tc.sweep(); err != nil || n != 0 {
				t.Fatalf("sweep while another replica holds its lock: %d %v, want 0 and no error", n, err)
			}
			if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, postgres.LockID(db, tc.lock)); err != nil {
				t.Fatal(err)
			}
			if n, err := tc.sweep(); err != nil || n != 1 {
				t.Fatalf("sweep once the lock is free: %d %v, want 1", n, err)
			}
		})
	}
}
