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
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_OutageLoggedOnce: while the database cannot store (a full disk), every
// lease of a due key fails, and so does the record of what the dispatcher forwards,
// renewed every ForwarderGone/6. Each is logged once, then at most once a minute, and
// once more when it works again: a line at each renewal, for the whole outage, is what
// README bounds, and without a line at the end the log never said that dispatch went on.
func TestDispatch_OutageLoggedOnce(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	accept(t, db, "evt_1", `{"id":"evt_1"}`)
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	triggers := map[string]string{
		"full_claims":             "BEFORE UPDATE ON claims",
		"full_dispatchers_insert": "BEFORE INSERT ON dispatchers",
		"full_dispatchers_update": "BEFORE UPDATE ON dispatchers",
	}
	for name, on := range triggers {
		if _, err := raw.Exec(`CREATE TRIGGER ` + name + ` ` + on + ` BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END`); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncBuffer
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 5)},
		Poll: 10 * time.Millisecond, ForwarderGone: 60 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	time.Sleep(time.Second) // a hundred renewals, and the leases backing off to 1.6 s
	for _, msg := range []string{`msg="lease failed"`, `msg="recording what this dispatcher forwards failed"`} {
		if n := strings.Count(logs.String(), msg); n != 1 {
			t.Errorf("%d lines %s in a second of a full disk, want 1:\n%s", n, msg, logs.String())
		}
	}
	if t.Failed() {
		return
	}
	for name := range triggers {
		if _, err := raw.Exec(`DROP TRIGGER ` + name); err != nil {
			t.Fatal(err)
		}
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		for _, msg := range []string{`msg="leases work again"`, `msg="recording what this dispatcher forwards works again"`} {
			if !strings.Contains(logs.String(), msg) {
				return fmt.Errorf("no line %s:\n%s", msg, logs.String())
			}
		}
		return nil
	})
	waitState(t, db, "evt_1", "processed")
}
