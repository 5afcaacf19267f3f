package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestSweepForensicKeys_AnotherReplicaSweeps: while another replica holds a sweep's
// lock (it is sweeping), the sweep deletes nothing and says so without an error; once
// the lock is free, it deletes what is due.
func TestSweepForensicKeys_AnotherReplicaSweeps(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	db, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close(context.WithoutCancel(ctx)) })
	if _, err := other.Exec(ctx, `
INSERT INTO key_traces (source, key_hash, first_seen, first_delivery, expired_at) VALUES ('ota', '\x01', 1, 1, 1);
INSERT INTO business_keys (source, hash, delivery, seen_at) VALUES ('ota', 'B', 1, 1);
INSERT INTO correlation_keys (rule, hash, source, delivery, seen_at) VALUES ('r', 'R', 'ota', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	cutoff := time.UnixMilli(1000)
	for _, sweep := range []struct {
		name string
		lock int64
		fn   func(context.Context, time.Time, int) (int64, error)
	}{
		{"Traces", sweepTracesLock, db.SweepTraces},
		{"BusinessKeys", sweepBusinessKeysLock, db.SweepBusinessKeys},
		{"CorrelationKeys", sweepCorrelationKeysLock, db.SweepCorrelationKeys},
	} {
		t.Run(sweep.name, func(t *testing.T) {
			tx, err := other.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, db.locks.id(sweep.lock)); err != nil {
				t.Fatal(err)
			}
			if n, err := sweep.fn(ctx, cutoff, 10); n != 0 || err != nil {
				t.Errorf("sweep while another replica sweeps = %d, %v; want 0, nil", n, err)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := sweep.fn(ctx, cutoff, 10); n != 1 || err != nil {
				t.Errorf("sweep = %d, %v; want 1", n, err)
			}
		})
	}
}
