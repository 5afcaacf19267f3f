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
