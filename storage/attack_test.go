package storage_test

import (
	"context"
	"fmt"
	"path/filepath"
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
