package receiver_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestRejections_FlushOutageLoggedOnce: while the database cannot store (a full disk),
// each flush of the counts of unauthenticated rejections fails, every 5 s for as long
// as junk keeps coming. It is logged once, then at most once a minute, and once when
// the counts are stored again.
func TestRejections_FlushOutageLoggedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	clock := storagetest.NewClock(time.Date(2026, 3, 2, 10, 0, 1, 0, time.UTC))
	db.Now = clock.Now
	var logs syncBuffer
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{otaSource(t)}, Store: db, Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	mux := http.NewServeMux()
	rc.Register(mux)
	e := &junkEnv{db: db, rc: rc, mux: mux}
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	const full = ` ON rejection_counts BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`
	for _, q := range []string{`CREATE TRIGGER full_insert BEFORE INSERT` + full, `CREATE TRIGGER full_update BEFORE UPDATE` + full} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for range 3 * receiver.DefaultRejectionsPerAddress {
		e.junkRequest(t, "192.0.2.1:1", "ota")
	}
	for range 20 { // twenty flushes, all failing
		if err := rc.FlushRejections(ctx); err == nil {
			t.Fatal("counts written into a full database")
		}
	}
	const failed = `msg="rejection counts not stored; kept for the next try"`
	if n := strings.Count(logs.String(), failed); n != 1 {
		t.Fatalf("%d lines for twenty failed flushes, want 1:\n%s", n, logs.String())
	}
	for _, q := range []string{`DROP TRIGGER full_insert`, `DROP TRIGGER full_update`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.FlushRejections(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `msg="rejection counts stored again"`) {
		t.Errorf("no line says the counts are stored again:\n%s", logs.String())
	}
}
