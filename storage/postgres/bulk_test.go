package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
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
	// Only an operator may start an action.
	storagetest.CreateUser(t, replicas[0], "ann", storage.RoleOperator, "a password of some length")
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

// TestBulkPreview_Plans checks that a preview's key and flag filters find their claims
// through the claims' index on (source, key), with PostgreSQL's statistics of planRows
// deliveries and as many claims: a key of no source in each configured source, flagged
// keys from their suspects. No step reads the claims or the deliveries in full.
func TestBulkPreview_Plans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many deliveries")
	}
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	db := openEngine(t, url)
	fillDeliveries(t, url, planRows, start)
	// A claim for each key of the accepted deliveries, won by the first of them, and
	// as many again of a source with no delivery stored any more.
	conn := postgrestest.Connect(t, url)
	if _, err := conn.Exec(ctx, `
INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at)
SELECT DISTINCT ON (source, key) source, key, 'processed', id, 'h', received_at, received_at + 86400000, received_at
FROM deliveries WHERE outcome = 'accepted' ORDER BY source, key, id`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
INSERT INTO claims (source, key, state, first_delivery, payload_hash, claimed_at, expires_at, updated_at)
SELECT 'cm', 'evt_' || i, 'processed', 0, 'h', $1::bigint, $1::bigint + 86400000, $1::bigint
FROM generate_series(1, (SELECT $2::bigint - count(*) FROM claims)) AS i`, start.UnixMilli(), planRows); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE claims`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    storage.BulkFilter
	}{
		{"Key", storage.BulkFilter{Key: fmt.Sprint("evt_", planRows/4)}},
		{"KeyOneSource", storage.BulkFilter{Key: fmt.Sprint("evt_", planRows/4), Source: "ota"}},
		{"Flag", storage.BulkFilter{Flag: storage.FlagAny}},
		{"FlagKind", storage.BulkFilter{Flag: storage.SuspectBusinessKey, FlagState: storage.SuspectOpen}},
		{"FlagState", storage.BulkFilter{FlagState: storage.SuspectDismissed, State: storage.StateProcessed}},
		{"FlagSource", storage.BulkFilter{Flag: storage.SuspectBusinessKey, Source: "ota"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := db.ExplainBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: tc.f,
				KeySources: []string{"ota", "pms", "cm"}, StuckBefore: start}, testing.Verbose())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, "claims_source_key_key") {
				t.Errorf("plan does not find the claims by their key index:\n%s", plan)
			}
			if strings.Contains(plan, "Seq Scan on claims") || strings.Contains(plan, "Seq Scan on deliveries") {
				t.Errorf("plan reads a table in full:\n%s", plan)
			}
			t.Logf("%+v\n%s", tc.f, plan)
		})
	}
}
