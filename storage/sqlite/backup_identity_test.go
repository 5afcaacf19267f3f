package sqlite_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// beforeIdentities puts the database file at path back to what a version before
// identities made: no identity, and no record of the migration that makes one.
func beforeIdentities(t *testing.T, path string) {
	t.Helper()
	execFile(t, path, `DELETE FROM settings WHERE name = 'database_id'`,
		`DELETE FROM migrations WHERE name = 'migrations/0034_database_id.sql'`)
}

// databaseID is the identity the database at path has.
func databaseID(t *testing.T, path string) string {
	t.Helper()
	id, err := sqlite.BackupID(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestDatabaseID: every database has an identity of its own, made with its schema, or
// by the migration for a database made before identities; reopening keeps it.
func TestDatabaseID(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	for _, p := range []string{a, b} {
		storagetest.OpenPath(t, p, sqlite.Options{}).Close()
	}
	idA, idB := databaseID(t, a), databaseID(t, b)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(idA) || idA == idB {
		t.Fatalf("database ids %q and %q, want two different random ones", idA, idB)
	}
	storagetest.OpenPath(t, a, sqlite.Options{}).Close()
	if again := databaseID(t, a); again != idA {
		t.Errorf("reopened, the id is %q, was %q", again, idA)
	}
	beforeIdentities(t, b)
	if id := databaseID(t, b); id != "" {
		t.Fatalf("put back to before identities, the id is %q", id)
	}
	storagetest.OpenPath(t, b, sqlite.Options{}).Close()
	if id := databaseID(t, b); id == "" || id == idA {
		t.Errorf("upgraded, the database made before identities has the id %q (the other's is %q)", id, idA)
	}
}

// TestBackup_RefusesAnotherHookdedupDatabase: a backup is refused over another hookdedup
// database (another identity), even one that issued no more delivery ids, and over
// another application's SQLite database; each keeps what it holds. A SQLite file with
// no table holds nothing, and is written over.
func TestBackup_RefusesAnotherHookdedupDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	db := backedUp(t, live, filepath.Join(dir, "copy.db"), "k1", "k2")
	defer db.Close()
	other := filepath.Join(dir, "other.db")
	storagetest.OpenPath(t, other, sqlite.Options{}).Close()
	otherID := databaseID(t, other)
	app := filepath.Join(dir, "app.db")
	execFile(t, app, `CREATE TABLE migrations (id INTEGER PRIMARY KEY, migration TEXT, batch INTEGER)`,
		`INSERT INTO migrations (migration, batch) VALUES ('create_users_table', 1)`)
	for _, tt := range []struct{ path, want string }{
		{other, "it is another hookdedup database (database id " + otherID},
		{app, "it is a SQLite database that hookdedup did not make"},
	} {
		_, err := db.Backup(ctx, tt.path)
		if err == nil || !strings.Contains(err.Error(), "backup to "+tt.path+": "+tt.want) {
			t.Errorf("backup over %s: %v; want a refusal naming it, saying %q", filepath.Base(tt.path), err, tt.want)
		}
	}
	if id := databaseID(t, other); id != otherID {
		t.Errorf("the other database's id after the refused backup: %q, was %q", id, otherID)
	}
	blank := filepath.Join(dir, "blank.db")
	execFile(t, blank, `CREATE TABLE t (x)`, `DROP TABLE t`)
	if _, err := db.Backup(ctx, blank); err != nil {
		t.Errorf("backup over a SQLite file without a table: %v", err)
	}
	if _, err := db.Backup(ctx, filepath.Join(dir, "copy.db")); err != nil {
		t.Errorf("backup over an earlier copy: %v", err)
	}
}

// TestBackup_OverCopyWithoutID: a copy taken before identities existed has none; a
// backup over it is judged by the delivery ids alone, as before: written over when it
// holds no more than the database, refused when it issued ids the database never did.
func TestBackup_OverCopyWithoutID(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	old := filepath.Join(dir, "old.db")
	db := backedUp(t, live, old, "k1")
	defer db.Close()
	beforeIdentities(t, old)
	info, err := db.Backup(ctx, old)
	if err != nil {
		t.Fatalf("backup over an earlier copy without an identity: %v", err)
	}
	if id := databaseID(t, old); id == "" || id != info.ID {
		t.Errorf("the copy's id is %q, the backup says %q", id, info.ID)
	}
	ahead := filepath.Join(dir, "ahead.db")
	more := backedUp(t, filepath.Join(dir, "more.db"), ahead, "k1", "k2", "k3")
	more.Close()
	beforeIdentities(t, ahead)
	if _, err := db.Backup(ctx, ahead); err == nil || !strings.Contains(err.Error(), "it holds more than") {
		t.Errorf("backup over a database without an identity that issued more ids: %v; want a refusal", err)
	}
}

// TestRestore_DatabaseID: a restored database has the backup's identity, so the copies
// taken before stay earlier ones, over another database or where none was (a lost one,
// a move); from a backup taken before identities, the identity of the database it
// replaced. A copy (RestoreCopy) has a new one.
func TestRestore_DatabaseID(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")
	backedUp(t, live, backup, "k1").Close()
	id := databaseID(t, live)
	if got := databaseID(t, backup); got != id {
		t.Fatalf("the backup's id is %q, the database's %q", got, id)
	}
	info, err := sqlite.Restore(ctx, backup, live)
	if err != nil {
		t.Fatal(err)
	}
	if got := databaseID(t, live); got != id || info.ID != id {
		t.Errorf("restored, the id is %q (restore says %q), was %q", got, info.ID, id)
	}
	beforeIdentities(t, backup)
	if _, err := sqlite.Restore(ctx, backup, live); err != nil {
		t.Fatal(err)
	}
	if got := databaseID(t, live); got != id {
		t.Errorf("restored from a backup without an identity, the id is %q, want the replaced database's %q", got, id)
	}
	// Where no database was (a lost one, a new machine): still the backup's.
	elsewhere := filepath.Join(dir, "new", "hookdedup.db")
	copyOf := filepath.Join(dir, "copy.db")
	db, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Backup(ctx, copyOf); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := sqlite.MakeDirs(filepath.Dir(elsewhere)); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Restore(ctx, copyOf, elsewhere); err != nil {
		t.Fatal(err)
	}
	if got := databaseID(t, elsewhere); got != id {
		t.Errorf("restored where no database was, the id is %q, want the backup's %q", got, id)
	}
	// A copy, over that one or anywhere: an identity of its own each time.
	for range 2 {
		if _, err := sqlite.RestoreCopy(ctx, copyOf, elsewhere); err != nil {
			t.Fatal(err)
		}
		if got := databaseID(t, elsewhere); got == id || len(got) != 32 {
			t.Errorf("restored as a copy, the id is %q, want a new one, not the backup's %q", got, id)
		}
	}
}
