package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// Readiness says the database can commit a write now. A primary whose database was made
// read-only (default_transaction_read_only, as a maintenance or a failover script sets
// it) is no standby, yet refuses every delivery: /readyz must not answer 200 there.
func TestPing_ReadOnlyDatabase(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	open(t, url) // migrated while writable
	conn := postgrestest.Connect(t, url)
	var name string
	if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+
		" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(t.Context(), url, postgres.Options{NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(t.Context()); err == nil {
		t.Fatal("Ping says ready on a database that commits no write")
	}
}
