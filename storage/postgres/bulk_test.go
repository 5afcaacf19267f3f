package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// takeovers counts the times a runner took a bulk action ("bulk action running").
type takeovers struct{ n atomic.Int64 }

func (h *takeovers) Enabled(context.Context, slog.Level) bool { return true }
func (h *takeovers) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "bulk action running" {
		h.n.Add(1)
	}
	return nil
}
func (h *takeovers) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *takeovers) WithGroup(string) slog.Handler      { return h }

// TestBulkReplicas: two replicas run RunBulkActions on one database over one queued
// action of many keys. Their lease is so short that it has run out by the end of each
// batch, so the replicas take the action from each other again and again, each
// claiming it between two batches of the other: still every key is released exactly
// once (one audit row each, no key skipped as changed by the other runner), and the
// action ends done.
func TestBulkReplicas(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	replicas := []*postgres.DB{openEngine(t, url), openEngine(t, url)}
	const keys = 300
	for i := range keys {
		key := fmt.Sprintf("k%04d", i)
		d := &storage.Delivery{Source: "ota", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: "h",
			Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json"}
		if err := replicas[0].Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}); err != nil {
			t.Fatal(err)
		}
	}
	// An hour on, every key is stuck, on both replicas' clocks; the clock runs, so
	// that leases run out.
	for _, db := range replicas {
		db.Now = func() time.Time { return time.Now().Add(time.Hour) }
	}
	a, err := replicas[0].CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{Stuck: true},
		Reason: "outage", Actor: "ann", StuckBefore: replicas[0].Now().Add(-10 * time.Minute)})
	if err != nil || a.Total != keys {
		t.Fatalf("preview: %+v, %v; want %d keys", a, err, keys)
	}

	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	counts := make([]*takeovers, len(replicas))
	for i, db := range replicas {
		counts[i] = &takeovers{}
		running.Go(func() {
			db.RunBulkActions(runCtx, storage.BulkRunConfig{Batch: 3, Lease: time.Millisecond, Poll: time.Millisecond,
				Logger: slog.New(counts[i])})
		})
	}
	defer func() {
		stop()
		running.Wait()
	}()
	if _, err := replicas[0].StartBulkAction(ctx, a.ID, "ann", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if a, err = replicas[1].BulkAction(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		if a.Finished() || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	running.Wait()
	t.Logf("the action was taken %d times by one replica, %d by the other", counts[0].n.Load(), counts[1].n.Load())

	if a.State != storage.BulkDone || a.Done != keys || a.Changed != keys || a.Skipped != 0 || a.Refused != 0 {
		t.Errorf("the action: %s, %d done, %d released, %d skipped, %d refused; want done, each of %d keys released",
			a.State, a.Done, a.Changed, a.Skipped, a.Refused, keys)
	}
	var rows, distinct int
	if err := rawConn(t, replicas[0]).QueryRow(ctx, `SELECT count(*), count(DISTINCT key) FROM audit_log
WHERE action = 'release'`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != keys || distinct != keys {
		t.Errorf("%d release audit rows of %d keys; want one for each of %d keys", rows, distinct, keys)
	}
	var released, outcomes int
	if err := rawConn(t, replicas[0]).QueryRow(ctx, `SELECT (SELECT count(*) FROM claims WHERE state = 'released'),
	(SELECT count(*) FROM bulk_action_keys WHERE action = $1 AND outcome = 'changed')`, a.ID).Scan(&released, &outcomes); err != nil {
		t.Fatal(err)
	}
	if released != keys || outcomes != keys {
		t.Errorf("%d keys released, %d outcomes 'changed'; want %d of each", released, outcomes, keys)
	}
}
