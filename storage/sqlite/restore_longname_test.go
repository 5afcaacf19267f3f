package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// A database whose name leaves room for its side files and the restore's interim copy,
// but not for the ".before-restore-<time>" the database it replaces is kept as: the
// name cannot be had, and the restore must say so rather than try numbers forever.
func TestRestore_NameTooLongToKeepAside(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, strings.Repeat("h", 226)+".db")
	backup := filepath.Join(dir, "backup.db")
	db, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sqlite.Restore(ctx, backup, live)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("restore over a database it cannot keep aside succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("restore still running after 20 s: it looks for a name to keep the database as, forever")
	}
}
