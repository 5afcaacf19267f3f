package enginetest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestLoginThrottle(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	pair := storage.Throttle{Free: 3, First: time.Second, Max: time.Minute, Forget: time.Hour}
	addr := storage.Throttle{Free: 20, First: time.Second, Max: time.Minute, Forget: time.Hour}
	policy := map[string]storage.Throttle{"pair:10.0.0.1 ana": pair, "addr:10.0.0.1": addr}
	// attempt reserves a check and returns how long it must wait instead (0: it may go on,
	// and counts as a failure unless it succeeds).
	attempt := func() time.Duration {
		t.Helper()
		until, err := db.LoginAttempt(ctx, c.Now(), policy)
		if err != nil {
			t.Fatal(err)
		}
		if until.IsZero() {
			return 0
		}
		return until.Sub(c.Now())
	}
	for i := range 3 {
		if d := attempt(); d != 0 {
			t.Fatalf("waits %v after %d failures", d, i)
		}
	}
	// Each further failure doubles the wait, up to Max; the wait runs from the failure,
	// and a refused attempt counts for nothing.
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, time.Minute, time.Minute} {
		if d := attempt(); d != want {
			t.Fatalf("wait %v, want %v", d, want)
		}
		c.Add(want / 2)
		if d := attempt(); d != want/2 {
			t.Fatalf("half-way: wait %v, want %v", d, want/2)
		}
		c.Add(want / 2)
		if d := attempt(); d != 0 {
			t.Fatalf("after the wait: %v", d)
		}
	}
	// An hour without failures and the count starts again.
	c.Add(time.Hour)
	for range 3 {
		if d := attempt(); d != 0 {
			t.Fatalf("after Forget: %v", d)
		}
	}
	if d := attempt(); d != time.Second {
		t.Fatalf("wait %v, want 1s", d)
	}
	// A success clears the pair and takes its attempt off the address's count.
	c.Add(time.Second)
	if d := attempt(); d != 0 {
		t.Fatal(d)
	}
	if err := db.LoginSucceeded(ctx, "pair:10.0.0.1 ana", "addr:10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if d := attempt(); d != 0 {
			t.Fatalf("after a success: %v", d)
		}
	}
	if got := (storage.Throttle{Free: 3, First: time.Second, Max: 15 * time.Minute}).Wait(1000); got != 15*time.Minute {
		t.Fatalf("Wait(1000) = %v", got)
	}
}

// TestDB_LoginAttemptConcurrent sends a burst of attempts at once: each is counted
// before the next is checked, so no more than the free ones go through.
func TestLoginAttemptConcurrent(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	policy := map[string]storage.Throttle{"pair:10.0.0.1 ana": {Free: 3, First: time.Minute, Max: time.Hour, Forget: time.Hour}}
	var passed atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			until, err := db.LoginAttempt(ctx, c.Now(), policy)
			if err != nil {
				t.Error(err)
			}
			if until.IsZero() {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := passed.Load(); n != 3 {
		t.Fatalf("%d of 50 concurrent attempts went through, want 3", n)
	}
}

// throttleSecrets are scopes as the console makes them, each holding what must not
// stand in the database in clear: a session's id, a device cookie's id, a password
// typed as a name, an address, and names no text column keeps as they are.
var throttleSecrets = map[string]string{
	"session:ZZK0bq3dVx8cVbE1sIfN0rQm5lWJtQ4bcyT2Xo1Nn6A 10.0.0.1 ana": "ZZK0bq3dVx8cVbE1sIfN0rQm5lWJtQ4bcyT2Xo1Nn6A",
	"device:q7Rf3kD9Lw2Xv5Ns8Pb1Tg ana":                                "q7Rf3kD9Lw2Xv5Ns8Pb1Tg",
	"pair:10.0.0.1 Tr0ub4dor&3-horse-staple":                           "Tr0ub4dor&3-horse-staple",
	"addr:10.0.0.1":                                                    "10.0.0.1",
	"pair:10.0.0.1 a\x00b":                                             "a\x00b",
	"pair:10.0.0.1 a\uFFFDb":                                           "a\uFFFDb",
}

// TestLoginThrottle_KeyedByDigest: the table keeps each scope under its ThrottleKey
// alone, never any part of the scope as given; the counts still come back by scope (a
// success finds the rows to clear and to take its attempt off), and two names one
// engine could store alike (a NUL byte, the character PostgreSQL's text puts in its
// place) count apart.
func TestLoginThrottle_KeyedByDigest(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	policy := map[string]storage.Throttle{}
	var want []string
	for scope := range throttleSecrets {
		policy[scope] = storage.Throttle{Free: 1, First: time.Minute, Max: time.Hour, Forget: time.Hour}
		want = append(want, storage.ThrottleKey(scope))
	}
	slices.Sort(want)
	if until, err := db.LoginAttempt(ctx, c.Now(), policy); err != nil || !until.IsZero() {
		t.Fatalf("first attempt: until %v, %v", until, err)
	}
	keys := e.ThrottleKeys(t, db)
	if !slices.Equal(keys, want) {
		t.Errorf("login_failures keys:\n%q\nwant each scope's ThrottleKey:\n%q", keys, want)
	}
	for _, k := range keys {
		for scope, secret := range throttleSecrets {
			if strings.Contains(k, secret) {
				t.Errorf("login_failures holds %q of the scope %q in clear: %q", secret, scope, k)
			}
		}
	}
	// Each scope waits now, by itself: the NUL name's count is not the other's.
	for scope := range throttleSecrets {
		one := map[string]storage.Throttle{scope: policy[scope]}
		if until, err := db.LoginAttempt(ctx, c.Now(), one); err != nil || until.IsZero() {
			t.Errorf("%q after its failure: until %v, %v; want a wait", scope, until, err)
		}
	}
	if err := db.LoginSucceeded(ctx, "pair:10.0.0.1 Tr0ub4dor&3-horse-staple", "addr:10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if got := e.ThrottleKeys(t, db); len(got) != len(want)-1 || slices.Contains(got, storage.ThrottleKey("pair:10.0.0.1 Tr0ub4dor&3-horse-staple")) {
		t.Errorf("after a success, login_failures keys:\n%q\nwant all but the pair's", got)
	}
	for _, scope := range []string{"pair:10.0.0.1 Tr0ub4dor&3-horse-staple", "addr:10.0.0.1"} {
		one := map[string]storage.Throttle{scope: policy[scope]}
		if until, err := db.LoginAttempt(ctx, c.Now(), one); err != nil || !until.IsZero() {
			t.Errorf("%q after the success: until %v, %v; want no wait", scope, until, err)
		}
	}
}

// ThrottleKeysUpgrade is the upgrade to a throttle that keys its rows by digest: a
// database where an earlier version counted failures under scopes in clear, made by
// downgrade from db (which it closes) and opened by this version, holds none of them
// afterwards, and every count starts again.
func ThrottleKeysUpgrade(t *testing.T, e Engine, downgrade func(t *testing.T, db storage.Store, scope string, failures int, at time.Time) storage.Store) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	const scope = "pair:10.0.0.1 Tr0ub4dor&3-horse-staple"
	policy := map[string]storage.Throttle{scope: {Free: 3, First: time.Minute, Max: time.Hour, Forget: time.Hour}}
	db = downgrade(t, db, scope, 10, c.Now())
	e.SetClock(db, c.Now)
	if keys := e.ThrottleKeys(t, db); len(keys) != 0 {
		t.Errorf("after the upgrade login_failures holds %q, want nothing", keys)
	}
	for i := range 3 {
		if until, err := db.LoginAttempt(ctx, c.Now(), policy); err != nil || !until.IsZero() {
			t.Fatalf("attempt %d after the upgrade: until %v, %v; want no wait: the count starts again", i+1, until, err)
		}
	}
	if until, err := db.LoginAttempt(ctx, c.Now(), policy); err != nil || until.IsZero() {
		t.Fatalf("attempt 4 after the upgrade: until %v, %v; want a wait", until, err)
	}
}
