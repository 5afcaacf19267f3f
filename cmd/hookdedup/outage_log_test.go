package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestRollupStats_LogsAFailureOnce: a database that cannot store (a full disk) fails the
// dashboard's roll-up at every round, as it fails every delivery. README bounds what
// such an outage writes to the log; a line each round for the whole outage (every 5
// s, for hours) is what it bounds. The first failure is logged, the next ones at most
// once a minute with how many went unlogged, and the first round that stores again
// says so, with that count.
func TestRollupStats_LogsAFailureOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storagetest.Record(t, db, &storage.Delivery{Source: "ota", Status: 200, Key: "k1", KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{"id":"k1"}`), ContentType: "application/json"}, storage.ClaimOptions{TTL: time.Hour})
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{
		`CREATE TRIGGER full_insert BEFORE INSERT ON delivery_stats BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`,
		`CREATE TRIGGER full_update BEFORE UPDATE ON delivery_stats BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var buf lockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rollupStatsEvery(ctx, db, log, 10*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()

	time.Sleep(500 * time.Millisecond) // about 50 rounds, all failing
	if n := strings.Count(buf.String(), `msg="rolling up delivery stats"`); n != 1 {
		t.Fatalf("%d lines for a roll-up failing at every round for half a second, want 1:\n%s", n, buf.String())
	}
	for _, q := range []string{`DROP TRIGGER full_insert`, `DROP TRIGGER full_update`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(buf.String(), `msg="delivery stats rolled up again"`) {
			return fmt.Errorf("no line says the roll-up stores again:\n%s", buf.String())
		}
		return nil
	})
	if !strings.Contains(buf.String(), "unlogged=") {
		t.Errorf("the line that says the roll-up stores again does not say how many failures went unlogged:\n%s", buf.String())
	}
}

// TestWatchSchema_LogsAFailureOnce: while the database cannot be read, serve's look for
// migrations it does not know fails at every round (every 5 s, for the whole outage).
// It is logged once, then at most once a minute, and once when a look works again.
func TestWatchSchema_LogsAFailureOnce(t *testing.T) {
	old := schemaCheckEvery
	schemaCheckEvery = 10 * time.Millisecond
	t.Cleanup(func() { schemaCheckEvery = old })
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`ALTER TABLE migrations RENAME TO migrations_away`); err != nil {
		t.Fatal(err)
	}
	var buf lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	newer := make(chan error, 1)
	go func() {
		defer close(done)
		watchSchema(ctx, db, slog.New(slog.NewTextHandler(&buf, nil)), newer)
	}()
	defer func() { cancel(); <-done }()

	time.Sleep(500 * time.Millisecond) // about 50 looks, all failing
	if n := strings.Count(buf.String(), `msg="could not check the database's schema"`); n != 1 {
		t.Fatalf("%d lines for a schema check failing at every round for half a second, want 1:\n%s", n, buf.String())
	}
	if _, err := raw.Exec(`ALTER TABLE migrations_away RENAME TO migrations`); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(buf.String(), `msg="the database's schema checked again"`) {
			return fmt.Errorf("no line says the schema is checked again:\n%s", buf.String())
		}
		return nil
	})
	select {
	case err := <-newer:
		t.Errorf("the schema this build migrated taken for a newer one: %v", err)
	default:
	}
}
