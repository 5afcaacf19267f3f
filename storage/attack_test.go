package storage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAttack_FailedKeyOutlivesItsTTL: a key whose hand-off failed is still owed
// downstream (the README's retention section counts it so, and says the claims sweep
// keeps keys still owed downstream). Once its ttl has passed, the claims sweep must not
// delete it: it would leave the stuck list without an operator ever seeing it, and the
// retention sweep would then delete the only copy of its payload.
func TestAttack_FailedKeyOutlivesItsTTL(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
	clk := newClock(db)
	d := mustRecord(t, db, delivery("ota", "evt_weekend", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	handOff(t, db, "evt_weekend", storage.AttemptResult{Failed: true, LastError: "downstream answered 503"})

	// The downstream was down over a weekend: the ttl passed before anyone looked.
	clk.Add(2 * time.Hour)
	if _, err := db.SweepExpired(ctx, clk.Now(), 1000); err != nil {
		t.Fatal(err)
	}
	sweepAll(t, db, clk.Now().Add(-time.Hour), 100)

	c, err := db.Claim(ctx, "ota", "evt_weekend")
	if err != nil {
		t.Fatalf("the failed key is gone after the claims sweep (%v): it no longer shows as stuck, and the event was never handed downstream", err)
	}
	if c.State != storage.StateFailed {
		t.Errorf("state %q, want failed", c.State)
	}
	if _, err := db.Delivery(ctx, d.ID); err != nil {
		t.Errorf("the failed key's payload was deleted: %v", err)
	}
}

// TestAttack_RestoreReusesDeliveryIDs: delivery ids "come from a persistent sequence and
// are never reused". A restore from a backup takes the sequence back to the backup's,
// so the ids issued after the backup (already answered to providers, and sent
// downstream in X-Hookdedup-Delivery) are issued again, to other events.
func TestAttack_RestoreReusesDeliveryIDs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")

	db, err := storage.Open(live, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		mustRecord(t, db, delivery("ota", fmt.Sprintf("k%d", i), "h"), day)
	}
	if _, err := db.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	after := mustRecord(t, db, delivery("ota", "after-backup", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Restore(ctx, backup, live); err != nil {
		t.Fatal(err)
	}
	restored := MustOpenPath(t, live)
	next := mustRecord(t, restored, delivery("ota", "after-restore", "h"), day)
	if next.ID <= after.ID {
		t.Fatalf("after the restore a new event got delivery id %d; id %d was issued before the restore to %s/%s: an id issued twice",
			next.ID, after.ID, after.Source, after.Key)
	}
}

// TestAttack_ReplacedFileGetsTheOldWAL: once the database file is replaced while open
// (a backup moved over it), hookdedup answers 503 and says to restart. It must not leave
// the replaced database's WAL at the path: SQLite does not checkpoint or remove the WAL
// of a file that has moved when it closes, and the next open replays that WAL, written
// for another file, into the one now at the path. The restarted server then serves a
// malformed database, and reports itself ready.
func TestAttack_ReplacedFileGetsTheOldWAL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")
	db, err := storage.Open(live, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustRecord(t, db, delivery("ota", fmt.Sprintf("before-%d", i), "h"), day)
	}
	if _, err := db.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	// Enough after the backup that the live file's pages no longer match the backup's.
	body := strings.Repeat("x", 2000)
	for i := range 1500 {
		d := delivery("ota", fmt.Sprintf("after-%d", i), "h")
		d.Body = []byte(`{"pad":"` + body + `"}`)
		mustRecord(t, db, d, day)
	}
	if err := os.Rename(backup, live); err != nil {
		t.Fatal(err)
	}
	if err := db.Record(ctx, delivery("ota", "noticed", "h"), day); !errors.Is(err, storage.ErrFileGone) {
		t.Fatalf("a delivery after the file was replaced: %v, want ErrFileGone", err)
	}
	if err := db.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	// Restarted, as the log and /readyz say to.
	again, err := storage.Open(live, storage.Options{})
	if err != nil {
		t.Fatalf("reopen after the restart: %v", err)
	}
	defer again.Close()
	if err := again.IntegrityCheck(ctx); err != nil {
		t.Fatalf("the file at the path after a restart: %v", err)
	}
}

// TestAttack_ReleaseAfterFileRemoved: once the database file has left its path, intake
// and readiness answer 503, but a release (console, API, CLI through the same method)
// still reports success: it commits into the removed file, which nobody will open
// again, and the operator is told the key was released.
func TestAttack_ReleaseAfterFileRemoved(t *testing.T) {
	ctx := context.Background()
	live := filepath.Join(t.TempDir(), "hookdedup.db")
	db := MustOpenPath(t, live)
	mustRecord(t, db, delivery("ota", "evt_1", "h"), day)
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	if err := db.Record(ctx, delivery("ota", "evt_2", "h"), day); !errors.Is(err, storage.ErrFileGone) {
		t.Fatalf("a delivery after the file was removed: %v, want ErrFileGone", err)
	}
	r, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "ana", Reason: "PMS restored"})
	if !errors.Is(err, storage.ErrFileGone) {
		t.Fatalf("a release after the file was removed: %+v, %v; want ErrFileGone", r, err)
	}
}
