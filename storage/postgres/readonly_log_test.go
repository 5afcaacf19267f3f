package postgres_test

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestReadOnly_LoggedOnce: against a server that stays read-only (a URL that names a
// standby alone, say), each readiness probe remakes the pool, at most once a second;
// that is logged once, then at most once a minute, as every outage is, and once more
// when the server takes writes again. It was a warning a second for as long as it
// lasted.
func TestReadOnly_LoggedOnce(t *testing.T) {
	ctx := t.Context()
	dbURL := postgrestest.NewDatabase(t)
	open(t, dbURL).Close()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	var logs storagetest.LogBuffer
	db, err := postgres.Open(ctx, dbURL, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin := postgrestest.Connect(t, dbURL)
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+name+` SET default_transaction_read_only = on`); err != nil {
		t.Fatal(err)
	}
	postgres.ResetPool(db) // the connections made from now on are read-only
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); {
		if err := db.Ping(ctx); err == nil {
			t.Fatal("readiness of a read-only server")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "takes no writes"); n != 1 {
		t.Errorf("%d lines over 3.5 s of a read-only server, want 1:\n%s", n, logs.String())
	}
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+name+` RESET default_transaction_read_only`); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); db.Ping(ctx) != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not ready 10 s after the server takes writes again")
		}
	}
	if !strings.Contains(logs.String(), "takes writes again") {
		t.Errorf("no line when the server took writes again:\n%s", logs.String())
	}
}
