package receiver_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// holdWriteLock takes the write lock of the database at path on a connection of its own,
// as another process would (begin is "BEGIN IMMEDIATE" or "BEGIN EXCLUSIVE"), and
// returns what lets it go, which the test's end does too.
func holdWriteLock(t *testing.T, path, begin string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_busy_timeout=100")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(context.Background())
	if err != nil {
		other.Close()
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), begin); err != nil {
		conn.Close()
		other.Close()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			other.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// syncBuffer is a log that a test reads while others write it.
type syncBuffer = storagetest.LogBuffer

// newEnvAt is newEnv with the database at path and one logger for storage and receiver.
func newEnvAt(t *testing.T, path string, log *slog.Logger) *testEnv {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db := storagetest.OpenPath(t, path, sqlite.Options{Logger: log})
	src := otaSource(t)
	srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096, Logger: log}), nil)
	return &testEnv{db: db, srv: srv, src: src}
}

// ready returns the status and body of GET /readyz.
func (e *testEnv) ready(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.Get(e.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHandler_DatabaseFileGone takes the database file away from under a running
// receiver, as `rm -rf` of its directory or a file moved over it would. SQLite goes on
// writing into the file it has open, which nobody will open again: from then on
// deliveries and readiness must answer 503, never 200, and the log must say what
// happened once, naming the file.
func TestHandler_DatabaseFileGone(t *testing.T) {
	for _, c := range []struct {
		name   string
		remove func(t *testing.T, path string)
	}{
		{"DirectoryRemoved", func(t *testing.T, path string) {
			if err := os.RemoveAll(filepath.Dir(path)); err != nil {
				t.Fatal(err)
			}
		}},
		{"FileReplaced", func(t *testing.T, path string) {
			// Another database, as a restore by hand would put there.
			other := filepath.Join(filepath.Dir(path), "restored.db")
			db, err := sqlite.Open(other, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			e := newEnvAt(t, filepath.Join(t.TempDir(), "data", "hookdedup.db"), slog.New(slog.NewTextHandler(&logs, nil)))
			if code, a, _ := e.post(t, "ota", "msg_before", cancellation, nil); code != 200 || a.Status != "accepted" {
				t.Fatalf("before: %d %+v", code, a)
			}
			if code, body := e.ready(t); code != 200 {
				t.Fatalf("readyz before = %d %s", code, body)
			}

			c.remove(t, e.db.Path())

			// Concurrent deliveries (one batch or several), then one more alone, and the
			// probe in between: not one may be 200.
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					code, a, h := e.post(t, "ota", fmt.Sprintf("msg_after_%d", i), cancellation, nil)
					if code != 503 || a.Status != "" || a.Error == "" || h.Get("Retry-After") == "" {
						t.Errorf("delivery %d after: %d %+v Retry-After %q; want 503 with an error and Retry-After",
							i, code, a, h.Get("Retry-After"))
					}
				})
			}
			wg.Wait()
			if code, body := e.ready(t); code != 503 {
				t.Errorf("readyz after = %d %s, want 503", code, body)
			}
			if code, a, _ := e.post(t, "ota", "msg_before", cancellation, nil); code != 503 {
				t.Errorf("a redelivery after: %d %+v, want 503", code, a)
			}
			if code, body := e.ready(t); code != 503 {
				t.Errorf("readyz at last = %d %s, want 503", code, body)
			}

			var named []string
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, e.db.Path()) {
					named = append(named, line)
				}
			}
			if len(named) != 1 || !strings.Contains(named[0], "level=ERROR") || !strings.Contains(named[0], "restart") {
				t.Errorf("log lines naming %s: %q; want one error that says a restart is needed", e.db.Path(), named)
			}
		})
	}
}

// TestHandler_ForeignLockBound holds the write lock from another connection, as another
// process would, while the dispatcher, the sweeps and readiness probes all wait on the
// one write connection too, each for a whole busy timeout at a time. Every delivery must
// still be answered within the busy timeout and a second: 503 with Retry-After, as a
// provider that gives up on a slow answer must still see a 503. Nothing answered 503 may
// have been stored, and once the lock is let go intake works again.
func TestHandler_ForeignLockBound(t *testing.T) {
	const busy = 300 * time.Millisecond
	e := newEnv(t, sqlite.Options{BusyTimeout: busy})

	release := holdWriteLock(t, e.db.Path(), "BEGIN IMMEDIATE")

	ctx, cancel := context.WithCancel(context.Background())
	probing, stopProbes := context.WithCancel(ctx)
	var bg sync.WaitGroup
	t.Cleanup(func() { cancel(); bg.Wait() }) // before newEnv's cleanup closes the database
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: e.db, Sources: []receiver.Source{e.src}, Poll: time.Millisecond})
	bg.Go(func() { d.Run(ctx) })
	bg.Go(func() {
		receiver.RunSweeps(ctx, e.db, receiver.SweepConfig{Every: time.Millisecond, Retention: time.Hour},
			receiver.NewMetrics(nil), slog.New(slog.DiscardHandler))
	})
	for range 4 {
		bg.Go(func() {
			for probing.Err() == nil {
				req, _ := http.NewRequestWithContext(probing, http.MethodGet, e.srv.URL+"/readyz", nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}

	const senders, each = 3, 4
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				start := time.Now()
				code, a, h := e.post(t, "ota", fmt.Sprintf("msg_locked_%d_%d", s, i), cancellation, nil)
				took := time.Since(start)
				if code != 503 || a.Error == "" || h.Get("Retry-After") == "" {
					t.Errorf("delivery %d/%d under the lock: %d %+v Retry-After %q; want 503 with Retry-After",
						s, i, code, a, h.Get("Retry-After"))
				}
				if took > busy+time.Second {
					t.Errorf("delivery %d/%d under the lock was answered after %s; busy_timeout is %s, the bound %s",
						s, i, took.Round(time.Millisecond), busy, busy+time.Second)
				}
			}
		})
	}
	wg.Wait()

	stopProbes()
	release()
	recovered := false
	for range 20 {
		code, a, _ := e.post(t, "ota", "msg_after_lock", cancellation, nil)
		if code == 200 {
			if a.Status != "accepted" {
				t.Fatalf("after the lock: %+v, want accepted", a)
			}
			recovered = true
			break
		}
	}
	if !recovered {
		t.Fatal("intake still answers 503 after the lock was let go")
	}
	if c := e.counts(t); c.Accepted != 1 || c.Duplicate != 0 {
		t.Fatalf("stored %+v; want only the delivery after the lock: a 503 means not stored", c)
	}
}

// TestHandler_StoreFailuresLoggedAtMostEvery10s makes every delivery fail to be stored,
// as a full disk does under load: each still answers 503, but the log gets one line per
// 10 s, which says how many failures before it went without a line, not one line each.
func TestHandler_StoreFailuresLoggedAtMostEvery10s(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// A closed database refuses each write once its busy timeout has passed.
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{BusyTimeout: 20 * time.Millisecond})
	var mu sync.Mutex
	now := time.Now() // the signatures' timestamps are checked against it
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	src := otaSource(t)
	srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096, Logger: log, Now: clock}), nil)
	e := &testEnv{db: db, srv: srv, src: src}
	if err := db.Close(); err != nil { // every Record fails from here on
		t.Fatal(err)
	}
	send := func(n int) {
		t.Helper()
		for i := range n {
			if code, _, _ := e.post(t, "ota", fmt.Sprintf("evt_%d_%d", n, i), `{"amount":1}`, nil); code != http.StatusServiceUnavailable {
				t.Fatalf("delivery %d with the database closed: %d, want 503", i, code)
			}
		}
	}
	lines := func() []string {
		var out []string
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, `msg="delivery not stored"`) {
				out = append(out, line)
			}
		}
		return out
	}
	send(20)
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "unlogged=0") {
		t.Fatalf("20 failures within 10 s logged %d lines, want 1 saying unlogged=0:\n%s", len(got), logs.String())
	}
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	send(1)
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "unlogged=19") {
		t.Fatalf("a failure 10 s later: %d lines, want a second saying unlogged=19:\n%s", len(got), logs.String())
	}
}

// TestHandler_StoredAgainLogged: once the database takes writes again after failures
// (another process held the write lock past the busy timeout; on PostgreSQL a restart),
// the first delivery stored says so in the log, with the failures since the last line
// that got none: without it the log ends at a failure, and what failed after that
// line is never told. The line shares the bound of the failures' lines.
func TestHandler_StoredAgainLogged(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{BusyTimeout: 500 * time.Millisecond})
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	later := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	src := otaSource(t)
	srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, MaxBody: 4096, Logger: log, Now: clock}), nil)
	e := &testEnv{db: db, srv: srv, src: src}
	count := func(msg string) int { return strings.Count(logs.String(), `msg="`+msg+`"`) }
	// lastSays reports whether the last line of msg ends with attr.
	lastSays := func(msg, attr string) bool {
		last := ""
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, `msg="`+msg+`"`) {
				last = line
			}
		}
		return strings.HasSuffix(strings.TrimSpace(last), " "+attr)
	}
	send := func(key string, want int) {
		t.Helper()
		if code, _, _ := e.post(t, "ota", key, `{"amount":1}`, nil); code != want {
			t.Fatalf("delivery %s: %d, want %d\n%s", key, code, want, logs.String())
		}
	}

	send("evt_before", http.StatusOK)
	release := holdWriteLock(t, path, "BEGIN IMMEDIATE")
	for i := range 3 {
		send(fmt.Sprintf("evt_failed_%d", i), http.StatusServiceUnavailable)
	}
	release()
	later(10 * time.Second)
	send("evt_after_1", http.StatusOK)
	send("evt_after_2", http.StatusOK)
	if n := count("delivery not stored"); n != 1 {
		t.Fatalf("%d lines of deliveries not stored, want 1:\n%s", n, logs.String())
	}
	if n := count("deliveries stored again"); n != 1 || !lastSays("deliveries stored again", "unlogged=2") {
		t.Fatalf("%d lines saying that deliveries are stored again, want 1 saying unlogged=2:\n%s", n, logs.String())
	}

	// Within the bound of the last line, the recovery waits for the first delivery
	// stored after it.
	release = holdWriteLock(t, path, "BEGIN IMMEDIATE")
	send("evt_failed_again", http.StatusServiceUnavailable)
	release()
	send("evt_soon", http.StatusOK)
	if n := count("deliveries stored again"); n != 1 {
		t.Fatalf("a recovery within 10 s of the last line logged at once:\n%s", logs.String())
	}
	later(10 * time.Second)
	send("evt_later", http.StatusOK)
	if n := count("deliveries stored again"); n != 2 || !lastSays("deliveries stored again", "unlogged=1") {
		t.Fatalf("the recovery after the bound: %d lines, want a second saying unlogged=1:\n%s", n, logs.String())
	}
}
