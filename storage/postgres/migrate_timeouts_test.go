package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestOpen_MigrationsOutlastTheServersTimeouts: a database (or its role) that sets
// statement_timeout and lock_timeout for every session, as managed servers and careful
// administrators do, bounds what hookdedup's requests wait for, not its migrations: a
// replica waiting while another migrates, and a migration waiting for a table's lock
// behind a reader, run to their end as they do without those settings. A migration
// cut by the server's timeout would roll back, and the next start would be cut at the
// same place: the upgrade could never finish.
func TestOpen_MigrationsOutlastTheServersTimeouts(t *testing.T) {
	const hold = 2 * time.Second
	const last = "migrations/0022_stats_unsummed.sql"
	url := postgrestest.NewDatabase(t)
	open(t, url).Close()
	conn := postgrestest.Connect(t, url)
	var name string
	if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+
		` SET statement_timeout = '300ms'; ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET lock_timeout = '300ms'`); err != nil {
		t.Fatal(err)
	}
	holdLock := func(t *testing.T, lock string, d time.Duration) {
		t.Helper()
		c := postgrestest.Connect(t, url)
		if _, err := c.Exec(t.Context(), `SET statement_timeout = 0; BEGIN; `+lock); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		timer := time.AfterFunc(d, func() {
			defer close(done)
			c.Exec(context.Background(), `COMMIT`)
		})
		t.Cleanup(func() {
			if !timer.Stop() {
				<-done
			}
		})
	}

	t.Run("SlowMigration", func(t *testing.T) {
		if _, err := conn.Exec(t.Context(), `ALTER TABLE delivery_stats DROP COLUMN IF EXISTS unsummed;
			DELETE FROM migrations WHERE name = '`+last+`'`); err != nil {
			t.Fatal(err)
		}
		holdLock(t, `LOCK TABLE delivery_stats IN ACCESS SHARE MODE`, hold)
		start := time.Now()
		db, err := postgres.Open(t.Context(), url, postgres.Options{MaxConns: 1})
		if err != nil {
			t.Fatalf("open gave up after %v, the migration waiting for a lock held %v: %v", time.Since(start).Round(time.Millisecond), hold, err)
		}
		defer db.Close()
		// The pool's one connection, the one that migrated, keeps the server's bounds.
		for _, name := range []string{"statement_timeout", "lock_timeout"} {
			if v, err := postgres.Setting(t.Context(), db, name); err != nil || v != "300ms" {
				t.Errorf("after the migrations the pool's connection has %s = %q (%v), want the database's 300ms", name, v, err)
			}
		}
		if !slices.Contains(migrationsApplied(t, conn), last) {
			t.Errorf("%s not applied", last)
		}
	})

	t.Run("WaitingReplica", func(t *testing.T) {
		holdLock(t, fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, postgres.MigrateLock), hold)
		start := time.Now()
		db, err := postgres.Open(t.Context(), url, postgres.Options{})
		if err != nil {
			t.Fatalf("open gave up after %v while another held the migration lock for %v: %v", time.Since(start).Round(time.Millisecond), hold, err)
		}
		db.Close()
	})
}
