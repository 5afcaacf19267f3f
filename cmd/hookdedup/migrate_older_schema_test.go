package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestMigrate_OlderSchemaLeftAsItIs: a --to that names a database an earlier version's
// replicas run on (the URL of the live database given by mistake, or the copy's target
// kept from before an upgrade) is refused as every command but serve refuses it, and its
// schema is left as it was: upgraded by a copy that then found it not empty, it would
// have changed what those replicas' queries rely on under them.
func TestMigrate_OlderSchemaLeftAsItIs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hookdedup.db")
	url := postgrestest.NewDatabase(t)
	for _, database := range []string{file, url} {
		if out, err := runCmd(t, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", database); err != nil {
			t.Fatalf("user add on %s: %v\n%s", displayPath(database), err, out)
		}
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	const last = "migrations/0022_stats_unsummed.sql"
	if _, err := conn.Exec(t.Context(), `ALTER TABLE delivery_stats DROP COLUMN unsummed;
		DELETE FROM migrations WHERE name = '`+last+`'`); err != nil {
		t.Fatal(err)
	}

	out, err := runCmd(t, "", "migrate", "--database", file, "--to", url)
	if err == nil || !strings.Contains(err.Error(), "lacks migrations 0022_stats_unsummed.sql") || !strings.Contains(err.Error(), "serve") ||
		!strings.Contains(err.Error(), "give --to a new one") {
		t.Errorf("migrate into an earlier version's database: %v, want a refusal naming the migration it lacks, serve, and a new database\n%s", err, out)
	}
	var applied bool
	if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM migrations WHERE name = '`+last+`')`).Scan(&applied); err != nil || applied {
		t.Errorf("migrate upgraded an earlier version's schema (%v)", err)
	}
}
