// Package storagetest is what the tests of storage and of the packages built on it
// share: a real database file in a temp dir, a clock that stands still, fixtures, and a
// bounded wait on a condition in place of sleeps. Only tests import it.
package storagetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// Open opens a database file in a fresh temp dir, with the production options, and
// closes it when the test ends. A real file, not ":memory:": each pooled connection
// would get a database of its own.
func Open(tb testing.TB) *sqlite.DB {
	tb.Helper()
	return OpenPath(tb, filepath.Join(tb.TempDir(), "hookdedup.db"), sqlite.Options{})
}

// OpenPath opens the database file at path with opt and closes it when the test ends;
// a failure to close fails the test.
func OpenPath(tb testing.TB, path string, opt sqlite.Options) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(path, opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close %s: %v", path, err)
		}
	})
	return db
}

// Record records d under opt, as the receiver does, and returns it with what the
// database filled in (id, outcome, first delivery).
func Record(tb testing.TB, db storage.Store, d *storage.Delivery, opt storage.ClaimOptions) *storage.Delivery {
	tb.Helper()
	if err := db.Record(context.Background(), d, opt); err != nil {
		tb.Fatal(err)
	}
	return d
}

// CreateUser adds a console user who signs in with password, hashed at bcrypt's
// lowest cost so that tests stay fast.
func CreateUser(tb testing.TB, db storage.Store, name, role, password string) storage.User {
	tb.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	u, err := db.CreateUser(context.Background(), storage.User{Name: name, Role: role, PasswordHash: string(hash)}, "test")
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// AgeSessions moves the last request of every console session in db d into the past, as
// if their browsers had been idle that long: a test of the idle limit then needs neither
// a sleep nor a clock shared with the server. It writes through a connection of its own,
// as another process would.
func AgeSessions(tb testing.TB, db *sqlite.DB, d time.Duration) {
	tb.Helper()
	raw, err := sql.Open("sqlite3", "file:"+db.Path()+"?_busy_timeout=5000")
	if err != nil {
		tb.Fatal(err)
	}
	defer raw.Close()
	res, err := raw.Exec(`UPDATE sessions SET seen_at = seen_at - ?`, d.Milliseconds())
	if err != nil {
		tb.Fatalf("age sessions: %v", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		tb.Fatalf("age sessions: %d sessions (%v), want at least one", n, err)
	}
}

// Clock is a time source that stands still until Add moves it, for tests where time
// itself is the subject (expiry, the minute a rejection falls in, session limits). Set
// db.Now (and the clock of the code under test) to its Now.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// Eventually waits until cond returns nil, trying it at once and then every few
// milliseconds (less often as the wait grows, at most every 100 ms), and fails the test
// with cond's last error if that has not happened within timeout. Tests wait with it
// instead of sleeping: it returns as soon as the condition holds, so the timeout can be
// generous for a slow, shared machine without slowing a passing test. Call it from the
// test's own goroutine.
func Eventually(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}
