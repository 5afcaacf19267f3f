package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestRestore_OverADatabaseThatHoldsNothing: on a new machine the first serve failed
// on a full disk (or a touch made the file) and left an empty database file, one
// whose table of migrations records none, or one whose first migrations alone committed. It issued no delivery id, so a restore over
// it has none to carry on: it restores, rather than refusing as if the ids it issued
// could not be read and warning that they may be issued again.
func TestRestore_OverADatabaseThatHoldsNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	db := backedUp(t, filepath.Join(dir, "old.db"), backup, numberedKeys(3)...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"empty file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		// migrate makes its table of migrations before the first migration's
		// transaction, which the full disk then failed.
		{"migrations table only", func(t *testing.T, path string) {
			execFile(t, path, `CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`)
		}},
		{"first migration only", func(t *testing.T, path string) {
			schema, err := os.ReadFile("migrations/0001_init.sql")
			if err != nil {
				t.Fatal(err)
			}
			execFile(t, path, string(schema),
				`CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`,
				`INSERT INTO migrations VALUES ('migrations/0001_init.sql', 0)`)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			live := filepath.Join(t.TempDir(), "hookdedup.db")
			c.make(t, live)
			info, err := sqlite.Restore(ctx, backup, live)
			if err != nil {
				t.Fatalf("restore over a database that holds nothing: %v", err)
			}
			if info.Deliveries != 3 {
				t.Errorf("restored %+v, want the backup's 3 deliveries", info)
			}
			restored := storagetest.OpenPath(t, live, sqlite.Options{MustExist: true})
			if c, err := storagetest.CountDeliveries(ctx, restored, ""); err != nil || c.Accepted != 3 {
				t.Errorf("the restored database holds %+v (%v), want 3 deliveries", c, err)
			}
		})
	}
}

// TestRestore_OverAnotherApplicationsDatabase: a database at the path that hookdedup did
// not make (database names the wrong file) is refused, saying so.
func TestRestore_OverAnotherApplicationsDatabase(t *testing.T) {
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	db := backedUp(t, filepath.Join(dir, "old.db"), backup, "k")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	execFile(t, other, `CREATE TABLE notes (body TEXT)`, `INSERT INTO notes VALUES ('keep me')`)
	_, err := sqlite.Restore(context.Background(), backup, other)
	if err == nil || !strings.Contains(err.Error(), "hookdedup did not make") {
		t.Fatalf("restore over another application's database: %v, want it refused as such", err)
	}
}
