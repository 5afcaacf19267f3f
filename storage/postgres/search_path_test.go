package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestOpen_SearchPathNamesNoSchema: a deployment kept in a schema of its own names it in
// the URL (search_path=…). A schema that does not exist (mistyped, or not created yet)
// is said to be that, naming the search_path, by serve as by every other command:
// not PostgreSQL's "no schema has been selected to create in", which names neither,
// nor "hookdedup never set this database up", which sends the operator to run serve
// on it.
func TestOpen_SearchPathNamesNoSchema(t *testing.T) {
	url := postgrestest.NewDatabase(t) + "&search_path=tenant_a"
	for _, opt := range []postgres.Options{{}, {MustExist: true}, {NoMigrate: true}} {
		_, err := postgres.Open(t.Context(), url, opt)
		if err == nil || errors.Is(err, storage.ErrNoDatabase) || !strings.Contains(err.Error(), "search_path (tenant_a)") ||
			!strings.Contains(err.Error(), "CREATE SCHEMA") {
			t.Errorf("open with %+v: %v, want an error naming the search_path and its missing schema", opt, err)
		}
	}
}

// TestOpen_SearchPathFirstSchemaNotSetUp: a search_path whose first schema is empty and
// whose later one holds an installation (search_path=hookdedup,public, written before
// moving out of public) names the empty one as hookdedup's. A command's open, which
// creates nothing, says that schema was never set up, and makes nothing in it, rather
// than taking public's migrations table for the schema's and then setting a second
// installation up in the empty one; the audit verifier checks no chain of public's.
func TestOpen_SearchPathFirstSchemaNotSetUp(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	open(t, url).Close() // hookdedup in public
	admin := postgrestest.Connect(t, url)
	if _, err := admin.Exec(t.Context(), `CREATE SCHEMA tenant_a`); err != nil {
		t.Fatal(err)
	}
	for _, opt := range []postgres.Options{{MustExist: true}, {NoMigrate: true}} {
		db, err := postgres.Open(t.Context(), url+"&search_path=tenant_a,public", opt)
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, storage.ErrNoDatabase) {
			t.Errorf("open with %+v, the first schema of the search_path empty: %v, want ErrNoDatabase", opt, err)
		}
		var tables int
		if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
			WHERE n.nspname = 'tenant_a'`).Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Fatalf("open with %+v made %d relations in tenant_a, want none", opt, tables)
		}
	}
}
