package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOpen_BulkKeysUpgrade: a release previewed by a version that did not keep its
// keys' first deliveries, and run after the upgrade. A key whose claim was as the
// preview found it at the upgrade gets its first delivery then, and is released once
// swept, as by any release. One swept before the upgrade cannot be told from a later
// claim of its key by its trace: it is skipped, which forgets nothing, and its
// business key still flags.
func TestOpen_BulkKeysUpgrade(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	clk := newClock(db)
	// Only an operator may start an action.
	storagetest.CreateUser(t, db, "ann", storage.RoleOperator, "a password of some length")
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour}
	storagetest.Record(t, db, bk("ota", "evt_1", "B1"), opt)
	storagetest.Record(t, db, bk("ota", "evt_2", "B2"), storage.ClaimOptions{TTL: 3 * time.Hour, BusinessWindow: 24 * time.Hour})
	clk.Add(2 * time.Hour)
	a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{Source: "ota"},
		Reason: "check", Actor: "ann", StuckBefore: clk.Now()})
	if err != nil || a.Total != 2 {
		t.Fatalf("preview: %+v, %v; want evt_1 and evt_2", a, err)
	}
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want evt_1 swept", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, path, `ALTER TABLE bulk_action_keys DROP COLUMN first_delivery`,
		`DELETE FROM migrations WHERE name = 'migrations/0028_bulk_key_first_delivery.sql'`)

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	db.Now = clk.Now
	clk.Add(2 * time.Hour)
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep after the upgrade: %d, %v; want evt_2 swept", n, err)
	}
	if _, err := db.StartBulkAction(ctx, a.ID, "ann", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := db.ClaimBulkAction(ctx, "r1", time.Minute); !ok || err != nil {
		t.Fatalf("claim the action: %v, %v", ok, err)
	}
	for range 10 {
		b, err := db.RunBulkBatch(ctx, a.ID, "r1", clk.Now(), 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if b.Over {
			break
		}
	}
	ks, err := db.BulkKeys(ctx, a.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, k := range ks {
		outcomes = append(outcomes, k.Key+" "+k.Outcome)
	}
	if want := []string{"evt_1 " + storage.BulkKeySkipped, "evt_2 " + storage.BulkKeyChanged}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %q; want %q", outcomes, want)
	}
	if again := storagetest.Record(t, db, bk("ota", "evt_3", "B1"), opt); !slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send of evt_1's event, skipped: flags %v, want its business key", again.Suspects)
	}
	if again := storagetest.Record(t, db, bk("ota", "evt_4", "B2"), opt); slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send of evt_2's event, released: flags %v, want its business key forgotten", again.Suspects)
	}
}
