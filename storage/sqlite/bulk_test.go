package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// whileWriting runs op and, until it returns, one write transaction after another,
// each calling between inside it. The write connection is handed to the writer that
// waits for it, so a transaction queued while op holds the writer runs as soon as op
// lets go of it: between sees each point at which op leaves the writer to intake.
// It returns whether between ever said true.
func whileWriting(t *testing.T, db *sqlite.DB, op func(), between func(tx *sql.Tx) bool) bool {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	seen := false
	for {
		select {
		case <-done:
			return seen
		default:
		}
		if err := db.WriteTx(context.Background(), func(tx *sql.Tx) error {
			seen = between(tx) || seen
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// keysOf counts the keys of bulk action id in tx.
func keysOf(t *testing.T, tx *sql.Tx, id int64) int {
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM bulk_action_keys WHERE action = ?`, id).Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

// failedKeys loads n failed keys of ota.
func failedKeys(t *testing.T, db *sqlite.DB, n int, claimedAt time.Time) {
	t.Helper()
	if err := storagetest.BulkLoad(context.Background(), db, storagetest.Fill{Source: "ota", Keys: n, State: storage.StateFailed,
		Key: func(i int) string { return fmt.Sprintf("k%06d", i) }, ClaimedAt: claimedAt, TTL: 24 * time.Hour,
		Headers: `{}`, Body: func(int) []byte { return []byte(`{}`) }}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDB_BulkPreviewLetsIntakeIn: a preview's keys are written a part at a time, so
// that a delivery arriving meanwhile is stored between two parts instead of waiting
// for all of them (50,000 keys in one transaction held the writer half a second).
// Until the last part the action is not listed, and cannot be started.
func TestDB_BulkPreviewLetsIntakeIn(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	const total = 10_000
	failedKeys(t, db, total, time.Now().Add(-time.Hour))
	var a storage.BulkAction
	// The preview's action is the first, id 1: a write that finds some of its keys
	// stored but not all found the writer free between two parts.
	between := whileWriting(t, db, func() {
		var err error
		a, err = db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{State: storage.StateFailed},
			Reason: "outage", Actor: "ann", StuckBefore: time.Now()})
		if err != nil {
			t.Error(err)
		}
	}, func(tx *sql.Tx) bool {
		if n := keysOf(t, tx, 1); n == 0 || n == total {
			return false
		}
		// The writer is ours: the preview is being written, so no reader may see it.
		if acts, _ := db.BulkActions(ctx, "", 0, 10); len(acts) != 0 {
			t.Errorf("a preview being written is listed: %+v", acts[0])
		}
		if _, err := db.BulkAction(ctx, 1); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("a preview being written is shown: %v", err)
		}
		return true
	})
	if a.Total != total || !between {
		t.Errorf("preview of %d keys; a write between two parts of it: %v", a.Total, between)
	}
	if got, err := db.BulkAction(ctx, a.ID); err != nil || got.State != storage.BulkPreview {
		t.Errorf("the preview once written: %+v, %v", got, err)
	}
}

// TestDB_BulkOldPreviewsClearedInParts: previews never started are deleted after a
// day, their keys a part at a time, so that a delivery arriving meanwhile is stored
// between two parts, as when a preview is written; none can be started meanwhile.
func TestDB_BulkOldPreviewsClearedInParts(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	clk := newClock(db)
	const total = 10_000
	failedKeys(t, db, total, clk.Now().Add(-time.Hour))
	req := storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{State: storage.StateFailed},
		Reason: "outage", Actor: "ann", StuckBefore: clk.Now()}
	old, err := db.CreateBulkPreview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(25 * time.Hour)
	req.Filter = storage.BulkFilter{Source: "none"}
	between := whileWriting(t, db, func() {
		if _, err := db.CreateBulkPreview(ctx, req); err != nil {
			t.Error(err)
		}
	}, func(tx *sql.Tx) bool {
		n := keysOf(t, tx, old.ID)
		return n > 0 && n < total
	})
	if keys, err := db.BulkKeys(ctx, old.ID, total); err != nil || len(keys) != 0 || !between {
		t.Errorf("the day-old preview: %d keys left, %v; a write between two parts of its deletion: %v", len(keys), err, between)
	}
	if acts, err := db.BulkActions(ctx, "", 0, 10); err != nil || len(acts) != 1 || acts[0].Filter.Source != "none" {
		t.Errorf("actions: %+v, %v; want the new preview alone", acts, err)
	}
}

// TestDB_BulkPreview_Plans: a preview's key and flag filters find their claims through
// the claims' index on (source, key), a key of no source in each configured source and
// flagged keys from their suspects: no step reads every claim.
func TestDB_BulkPreview_Plans(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	for _, tc := range []struct {
		name string
		f    storage.BulkFilter
	}{
		{"Key", storage.BulkFilter{Key: "evt_1"}},
		{"KeyOneSource", storage.BulkFilter{Key: "evt_1", Source: "ota"}},
		{"Flag", storage.BulkFilter{Flag: storage.FlagAny}},
		{"FlagKind", storage.BulkFilter{Flag: storage.SuspectBusinessKey, FlagState: storage.SuspectOpen}},
		{"FlagState", storage.BulkFilter{FlagState: storage.SuspectDismissed, State: storage.StateProcessed}},
		{"FlagSource", storage.BulkFilter{Flag: storage.SuspectCorrelation, Source: "ota"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := db.ExplainBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: tc.f,
				KeySources: []string{"ota", "pms"}, StuckBefore: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, "SEARCH c USING INDEX sqlite_autoindex_claims_1 (source=? AND key=?)") {
				t.Errorf("plan does not find the claims by their key index:\n%s", plan)
			}
			noScans(t, plan)
			t.Logf("%s", plan)
		})
	}
}
