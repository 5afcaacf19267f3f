package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestOpen_AnotherApplicationsDatabase: a database setting that names another
// application's SQLite file (a slip in the configuration, a --database mistyped) is
// refused by every command, saying what it is, and the file is left as it was. Opened
// as a new database, it had hookdedup's whole schema written into it, and migrate
// copied that empty schema into PostgreSQL as the database moved there, 0 deliveries
// "counted on both sides", for replicas to start on and take every redelivery as new.
func TestOpen_AnotherApplicationsDatabase(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		schema []string
	}{
		{"tables of its own", []string{`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)`}},
		// Laravel keeps a table named migrations, of other columns.
		{"a migrations table of its own", []string{
			`CREATE TABLE migrations (id INTEGER PRIMARY KEY, migration TEXT, batch INTEGER)`,
			`INSERT INTO migrations (migration, batch) VALUES ('2014_10_12_000000_create_users_table', 1)`,
			`CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.db")
			execFile(t, path, c.schema...)
			before := tablesOf(t, path)
			header := fileHeader(t, path)

			db, err := sqlite.Open(path, sqlite.Options{MustExist: true, ServeLock: true})
			if err == nil {
				db.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "another application's") {
				t.Errorf("open another application's database: %v, want it refused as another application's", err)
			}
			snap, err := sqlite.OpenSnapshot(ctx, path)
			if err == nil {
				snap.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "another application's") || strings.Contains(err.Error(), ".tmp") {
				t.Errorf("a snapshot of another application's database: %v, want it refused as another application's, naming the file", err)
			}
			if after := tablesOf(t, path); !slices.Equal(after, before) {
				t.Errorf("tables after the refusals: %v, want the application's own %v", after, before)
			}
			// Its journal mode among them: a write connection's open sets WAL mode.
			if after := fileHeader(t, path); !bytes.Equal(after, header) {
				t.Errorf("the file's header changed: % x, was % x", after, header)
			}
			for _, side := range []string{"-wal", "-shm", "-journal", sqlite.ServeLockSuffix} {
				if _, err := os.Stat(path + side); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s beside it after the refusals: %v", side, err)
				}
			}
		})
	}
}

// fileHeader is the 100-byte header of the SQLite file at path.
func fileHeader(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 100 {
		t.Fatalf("read %s: %d bytes, %v", path, len(b), err)
	}
	return b[:100]
}

// tablesOf lists the tables of the SQLite file at path.
func tablesOf(t *testing.T, path string) []string {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}
