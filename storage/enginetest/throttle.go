package enginetest

import (
	"context"
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
