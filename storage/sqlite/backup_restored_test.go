package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestBackup_OverCopyTakenBeforeRestore: after a restore from an older backup, a backup
// over the copy taken before the restore passes: the restore carried the delivery ids
// on, and that copy is an earlier one still, whatever the audit log holds.
func TestBackup_OverCopyTakenBeforeRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.db")
	old := filepath.Join(dir, "old.db")
	nightly := filepath.Join(dir, "nightly.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	audit := func(n int) {
		for range n {
			if err := db.AppendAudit(ctx, storage.AuditEntry{At: time.Now(), Actor: "alice", Action: "release",
				Source: "ota", Key: "evt_1", Reason: "r"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	audit(2)
	if _, err := db.Backup(ctx, old); err != nil {
		t.Fatal(err)
	}
	audit(10)
	if _, err := db.Backup(ctx, nightly); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Restore(ctx, old, path); err != nil {
		t.Fatalf("restore: %v", err)
	}
	db, err = sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	audit(1)
	if _, err := db.Backup(ctx, nightly); err != nil {
		t.Errorf("the nightly backup after a restore: %v", err)
	}
}
