package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_BulkRunnerOutageLoggedOnce: while the database cannot store (a full disk), the
// runner of bulk actions fails alike at every round: its claim of a queued action every
// Poll, and once it holds one, each batch every Lease/4. Each is logged once, then at
// most once a minute, and once when it works again, not a line a round for as long as
// the outage lasts.
func TestDB_BulkRunnerOutageLoggedOnce(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	// Only an operator may start an action.
	storagetest.CreateUser(t, db, "ann", storage.RoleOperator, "a password of some length")
	failedKeys(t, db, 3, time.Now().Add(-time.Hour))
	a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{State: storage.StateFailed},
		Reason: "outage", Actor: "ann", StuckBefore: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartBulkAction(ctx, a.ID, "ann", nil); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite3", "file:"+db.Path()+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const full = ` BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`
	exec(`CREATE TRIGGER full_actions BEFORE UPDATE ON bulk_actions` + full)

	var logs logBuffer
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.RunBulkActions(runCtx, storage.BulkRunConfig{Poll: 10 * time.Millisecond, Lease: 40 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	}()
	defer func() { stop(); <-done }()
	wait := func(msg string) {
		t.Helper()
		storagetest.Eventually(t, 10*time.Second, func() error {
			if !strings.Contains(logs.String(), msg) {
				return fmt.Errorf("no line %s:\n%s", msg, logs.String())
			}
			return nil
		})
	}
	count := func(msg string) {
		t.Helper()
		time.Sleep(500 * time.Millisecond) // fifty claims, or a dozen batches, all failing
		if n := strings.Count(logs.String(), msg); n != 1 {
			t.Fatalf("%d lines %s in half a second of a full disk, want 1:\n%s", n, msg, logs.String())
		}
	}

	count(`msg="claiming a bulk action"`)
	// The claim goes through; the batches, which release the keys, fail.
	exec(`CREATE TRIGGER full_claims BEFORE UPDATE ON claims` + full)
	exec(`DROP TRIGGER full_actions`)
	wait(`msg="bulk actions claimed again"`)
	wait(`msg="bulk action batch failed; trying again"`)
	count(`msg="bulk action batch failed; trying again"`)
	exec(`DROP TRIGGER full_claims`)
	wait(`msg="bulk action batches run again"`)
	wait(`msg="bulk action over"`)
}
