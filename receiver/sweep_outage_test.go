package receiver_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestSweeps_OutageLoggedOnce: while the database cannot store (a full disk), every
// round of sweeps fails alike: each sweep that deletes, and the sweep's time stored for
// the next start. A line for each of them at every round, for as long as the outage
// lasts, is what README bounds: the first failure, then at most one a minute, and one
// line when the sweeps work again.
func TestSweeps_OutageLoggedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	// Expired claims, so that the sweep of claims has rows to delete at every round.
	for i := range 3 {
		storagetest.Record(t, db, &storage.Delivery{Source: "ota", Status: 200, Key: fmt.Sprintf("k%d", i), KeyMethod: "event_id",
			PayloadHash: "h", Body: []byte(`{}`), ContentType: "application/json"}, storage.ClaimOptions{TTL: time.Millisecond})
	}
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	full := []string{
		`CREATE TRIGGER full_claims BEFORE DELETE ON claims BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`,
		`CREATE TRIGGER full_settings_insert BEFORE INSERT ON settings BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`,
		`CREATE TRIGGER full_settings_update BEFORE UPDATE ON settings BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`,
	}
	for _, q := range full {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		receiver.RunSweeps(ctx, db, receiver.SweepConfig{Every: 10 * time.Millisecond, Retention: time.Hour},
			receiver.NewMetrics(nil), slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	defer func() { cancel(); <-done }()

	time.Sleep(500 * time.Millisecond) // dozens of rounds, all failing
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d lines for sweeps failing at every round for half a second, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "database or disk is full") {
		t.Errorf("the line does not give the cause:\n%s", logs.String())
	}
	for _, trigger := range []string{"full_claims", "full_settings_insert", "full_settings_update"} {
		if _, err := raw.Exec(`DROP TRIGGER ` + trigger); err != nil {
			t.Fatal(err)
		}
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), `msg="sweeps work again"`) {
			return fmt.Errorf("no line says the sweeps work again:\n%s", logs.String())
		}
		return nil
	})
}
