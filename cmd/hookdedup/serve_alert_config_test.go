package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestServe_AlertConfigCheckedBeforeTheDatabase: an [[alert_channel]] or [[alert]]
// that cannot serve is refused before the database is opened, as a source that cannot
// is. A new version's replica started in a rolling upgrade with such a mistake
// migrated the shared schema first and only then stopped on it: the earlier version's
// replicas, seeing the schema newer, stopped as well, and none served until the
// mistake was found. A SQLite database is not made for such a start either.
func TestServe_AlertConfigCheckedBeforeTheDatabase(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	dir := t.TempDir()
	t.Chdir(dir)
	if out, err := runCmd(t, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", url); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
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
	const alerting = `
[[alert]]
name     = "pms-down"
kind     = "downstream_failing"
times    = 5
channels = ["ops"]

[[alert_channel]]
name = "ops"
type = "webhook"
url  = "http://127.0.0.1:9/alerts"
`
	for _, database := range []string{url, filepath.Join(dir, "hookdedup.db")} {
		cfg := filepath.Join(dir, "hookdedup.toml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("database = %q\naddr = \"127.0.0.1:0\"\n", database)+alerting), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := runCmd(t, "", "serve", "--config", cfg)
		if err == nil || !strings.Contains(err.Error(), `alert_channel "ops"`) {
			t.Fatalf("serve with an alert channel that cannot sign on %s: %v, want it refused naming the channel\n%s", displayPath(database), err, out)
		}
	}
	var applied bool
	if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM migrations WHERE name = '`+last+`')`).Scan(&applied); err != nil || applied {
		t.Errorf("a serve refused for its alerting upgraded the schema (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hookdedup.db")); err == nil {
		t.Errorf("a serve refused for its alerting made the SQLite database")
	}
}
