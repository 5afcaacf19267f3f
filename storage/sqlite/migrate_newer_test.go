package sqlite_test

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOpen_NewerSchema: a database that a newer version migrated (its migrations table
// names migrations this one does not have) is refused with the words the PostgreSQL
// engine uses, naming them: this version would skip the upkeep the newer schema asks
// for (the suspects' running totals' trigger and columns) and leave it wrong. The file
// is left as it was.
func TestOpen_NewerSchema(t *testing.T) {
	db := storagetest.Open(t)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, path,
		`INSERT INTO migrations (name, applied_at) VALUES ('migrations/0100_later.sql', 2), ('migrations/0099_future.sql', 1)`)
	before := fileMigrations(t, path)

	db2, err := sqlite.Open(path, sqlite.Options{MustExist: true})
	if err == nil {
		db2.Close()
		t.Fatal("a database with migrations this version does not have was opened")
	}
	const want = "the database's schema is newer than this hookdedup knows (migrations 0099_future.sql, 0100_later.sql): " +
		"run the newer version, or restore a backup taken before it migrated"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("open: %v\nwant it to say: %s", err, want)
	}
	if after := fileMigrations(t, path); after != before {
		t.Errorf("migrations after the refusal: %s, before: %s", after, before)
	}

	// The snapshot that `hookdedup migrate --to` copies from refuses it too: read as it
	// is, the newer schema's tables and columns would be left out of the copy.
	s, err := sqlite.OpenSnapshot(t.Context(), path)
	if err == nil {
		s.Close()
		t.Fatal("a snapshot of a database with migrations this version does not have was opened")
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("snapshot: %v\nwant it to say: %s", err, want)
	}
}

// fileMigrations lists the migrations the database file at path records.
func fileMigrations(t *testing.T, path string) string {
	t.Helper()
	raw := rawDB(t, path)
	var names string
	if err := raw.QueryRow(`SELECT group_concat(name, ' ') FROM (SELECT name FROM migrations ORDER BY name)`).Scan(&names); err != nil {
		t.Fatal(err)
	}
	return names
}
