// Package enginetest is the behaviour of a storage engine, written once against
// storage.Store: claims and deliveries, expiry and takeover, release, dispatch, users,
// sessions, the audit log, statistics. Each engine's own tests run it (Run) with a
// constructor of fresh, empty databases; what only one engine has (its files, its query
// plans, its pragmas) is tested beside that engine instead. Only tests import it.
//
// It imports no engine, so that a test written here cannot reach for one by mistake.
package enginetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"golang.org/x/crypto/bcrypt"
)

// Engine is what the suite needs of an engine.
type Engine struct {
	// Open returns a fresh, empty database, closed when the test ends (a failure to
	// close fails the test). Its clock is time.Now until SetClock moves it.
	Open func(tb testing.TB) storage.Store
	// Reopen returns another handle on db's database (one that Open returned), as
	// another process or replica would open it, closed when the test ends. Its writes
	// may wait on the other handle's for as long as a slow machine needs.
	Reopen func(tb testing.TB, db storage.Store) storage.Store
	// AddSuspect and SetMoneyMismatch store what intake finds in a claim's
	// transaction, directly, as fixtures: no method of storage.Store writes them alone.
	// AddSuspect returns s with its id.
	AddSuspect       func(tb testing.TB, db storage.Store, s storage.Suspect) storage.Suspect
	SetMoneyMismatch func(tb testing.TB, db storage.Store, id int64)
	// DeleteDelivery removes delivery id's row directly, as a claim from before every
	// delivery was stored names one that is not there: its payload is gone.
	DeleteDelivery func(tb testing.TB, db storage.Store, id int64)
	// AddMigration records the migration name as applied to db's database, as a newer
	// version's serve would, without changing the schema.
	AddMigration func(tb testing.TB, db storage.Store, name string)
	// ThrottleKeys returns the keys login_failures holds its rows under, as read from
	// the table by whoever has the database, sorted.
	ThrottleKeys func(tb testing.TB, db storage.Store) []string
	// SetClock makes db, one that Open returned, take now for the time in every method.
	SetClock func(db storage.Store, now func() time.Time)
	// SetMoneyRead makes a reprocess under thresholds on db run f once it has read its
	// keys' money, before its transaction begins (nil: nothing).
	SetMoneyRead func(db storage.Store, f func())
}

// Run runs every test of the suite against e, each as a subtest of its name.
func Run(t *testing.T, e Engine) {
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { test.fn(t, e) })
	}
}

// newClock sets db's clock to one that stands still at a fixed time until moved.
func newClock(e Engine, db storage.Store) *Clock {
	c := NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	e.SetClock(db, c.Now)
	return c
}

// delivery is a delivery as the receiver records it, answered 200 once stored.
func delivery(source, key, hash string) *storage.Delivery {
	return &storage.Delivery{Source: source, Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: hash,
		Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json"}
}

var day = storage.ClaimOptions{TTL: 24 * time.Hour}

// record records d under opt, as the receiver does, and returns it with what the
// database filled in (id, outcome, first delivery).
func record(tb testing.TB, db storage.Store, d *storage.Delivery, opt storage.ClaimOptions) *storage.Delivery {
	tb.Helper()
	if err := db.Record(context.Background(), d, opt); err != nil {
		tb.Fatal(err)
	}
	return d
}

// createUser adds a console user who signs in with password, hashed at bcrypt's lowest
// cost so that tests stay fast.
func createUser(tb testing.TB, db storage.Store, name, role, password string) storage.User {
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

// counts are the stored deliveries by outcome.
type counts struct {
	Accepted, Duplicate, Rejected, Mismatch int64
}

// countDeliveries counts one source's stored deliveries by outcome ("" counts every
// source), through every page of the events listing.
func countDeliveries(ctx context.Context, db storage.Store, source string) (counts, error) {
	var c counts
	err := db.EachDelivery(ctx, storage.DeliveryFilter{Source: source}, func(d storage.Delivery) error {
		switch d.Outcome {
		case storage.Accepted:
			c.Accepted++
		case storage.Duplicate:
			c.Duplicate++
		case storage.Rejected:
			c.Rejected++
		}
		if d.Mismatch {
			c.Mismatch++
		}
		return nil
	})
	if err != nil {
		return counts{}, fmt.Errorf("count deliveries: %w", err)
	}
	return c, nil
}

// Clock is a time source that stands still until Add moves it.
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

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// sweepAll walks the retention sweep to its end, limit deliveries a batch, and returns
// how many it deleted. It fails the test if a batch deletes more than limit, or if the
// walk takes more batches than deliveries exist.
func sweepAll(t *testing.T, db storage.Store, cutoff time.Time, limit int) int64 {
	t.Helper()
	CatchUpRollups(t, db)
	var total int64
	var from storage.SweepCursor
	for range 1000 {
		n, next, err := db.SweepDeliveries(context.Background(), db.Clock(), cutoff, from, limit)
		if err != nil {
			t.Fatal(err)
		}
		if n > int64(limit) {
			t.Fatalf("one batch of %d deleted %d", limit, n)
		}
		total += n
		if next.Done() {
			return total
		}
		from = next
	}
	t.Fatal("the retention sweep did not reach its end in 1000 batches")
	return 0
}

// CatchUpRollups rolls up every delivery not yet counted, as serve's roll-up loop does
// as deliveries come: retention deletes nothing the totals have not counted, so a
// test of retention rolls up first.
func CatchUpRollups(tb testing.TB, db interface {
	RollupStats(ctx context.Context, limit int) (int, error)
}) {
	tb.Helper()
	for range 1000 {
		n, err := db.RollupStats(context.Background(), 10000)
		if err != nil {
			tb.Fatal(err)
		}
		if n < 10000 {
			return
		}
	}
	tb.Fatal("the roll-ups did not catch up in 1000 rounds")
}

// handOff records one attempt of key's job as the dispatcher would, with result res.
func handOff(t *testing.T, db storage.Store, key string, res storage.AttemptResult) {
	t.Helper()
	ctx := context.Background()
	jobs, err := db.LeaseDue(ctx, db.Clock(), time.Minute, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Key == key {
			a := storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery, StartedAt: db.Clock(), Error: res.LastError}
			if moved, err := db.FinishAttempt(ctx, j, a, res); err != nil || !moved {
				t.Fatalf("finish attempt of %s: moved %v, %v", key, moved, err)
			}
			return
		}
	}
	t.Fatalf("no job due for %s", key)
}

// recordEvent records a delivery with business fields at the database clock's now.
func recordEvent(tb testing.TB, db storage.Store, source, key, hash, property, booking, status, amount string) *storage.Delivery {
	tb.Helper()
	d := delivery(source, key, hash)
	d.Property, d.Booking, d.EventStatus, d.Amount = property, booking, status, amount
	return record(tb, db, d, day)
}

// ids are the ids of ds, in order.
func ids(ds []storage.Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
