package receiver_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// fullDisk is a database whose attempt records fail as a full disk makes them fail
// while full is set, and whose leases fail so while leaseFull is.
type fullDisk struct {
	*sqlite.DB
	full, leaseFull atomic.Bool
	failures        atomic.Int64
	// hold, when set, holds each failing record until it is closed: a full disk's
	// commit that takes its time (the busy timeout, a slow disk) to fail.
	hold   chan struct{}
	leases atomic.Int64 // leases that took a job
}

var errDiskFull = errors.New("commit: database or disk is full")

// newFullDisk returns a downstream and a database, not full yet, with one event accepted
// and due: ota:evt_1.
func newFullDisk(t *testing.T) (*downstream, *fullDisk) {
	t.Helper()
	ds := newDownstream(t, 0, nil)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	accept(t, db, "evt_1", `{"id":"evt_1"}`)
	return ds, &fullDisk{DB: db}
}

func (f *fullDisk) FinishAttempt(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (bool, error) {
	if f.full.Load() {
		if f.hold != nil {
			<-f.hold
		}
		f.failures.Add(1)
		return false, errDiskFull
	}
	return f.DB.FinishAttempt(ctx, job, a, res)
}

func (f *fullDisk) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	if f.leaseFull.Load() {
		return nil, errDiskFull
	}
	jobs, err := f.DB.LeaseDue(ctx, now, lease, limit, sources)
	if len(jobs) > 0 {
		f.leases.Add(1)
	}
	return jobs, err
}

// TestDispatch_RecordFailsHandsOffOnce: the downstream takes an event and its attempt's
// record fails (a full disk). The outcome is kept and recorded again until it is, also
// when the job's lease runs out meanwhile: the event is handed off once, and its
// success is what its history says last.
func TestDispatch_RecordFailsHandsOffOnce(t *testing.T) {
	for _, c := range []struct {
		name    string
		release func(t *testing.T, st *fullDisk, skew *atomic.Int64)
		records int // attempts in the key's history
	}{
		// The disk has room again before the lease runs out.
		{"WithinLease", func(_ *testing.T, st *fullDisk, _ *atomic.Int64) { st.full.Store(false) }, 1},
		// The lease runs out while the disk is full, which fails leases too: once it has
		// room, the kept outcome is recorded before any lease takes the key over.
		{"LeaseRanOut", func(t *testing.T, st *fullDisk, skew *atomic.Int64) {
			st.leaseFull.Store(true)
			skew.Store(int64(time.Hour))
			waitFailures(t, st, 3)
			st.full.Store(false)
			st.leaseFull.Store(false)
		}, 1},
		// Records fail while leases pass: a lease takes the key over and records the
		// kept outcome, after the interruption it notes of the lease before.
		{"LeasedAgain", func(t *testing.T, st *fullDisk, skew *atomic.Int64) {
			skew.Store(int64(time.Hour))
			// Until a lease has taken the key over, the disk may only have room again
			// before it does: a loaded machine tried the record three times first.
			for deadline := time.Now().Add(10 * time.Second); st.leases.Load() < 2; {
				if time.Now().After(deadline) {
					t.Fatal("the key was not leased again in 10 s, its lease an hour past")
				}
				time.Sleep(5 * time.Millisecond)
			}
			waitFailures(t, st, st.failures.Load()+2)
			st.full.Store(false)
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			ds, st := newFullDisk(t)
			db := st.DB
			st.full.Store(true)
			var skew atomic.Int64
			now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			d := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 5)},
				Poll: 10 * time.Millisecond, FirstBackoff: 10 * time.Millisecond, Now: now})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { d.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			waitFailures(t, st, 1)
			c.release(t, st, &skew)
			waitState(t, db, "evt_1", storage.StateProcessed)
			if n := ds.received()["ota:evt_1"]; n != 1 {
				t.Errorf("the downstream took ota:evt_1 %d times; want once", n)
			}
			as, err := db.Attempts(context.Background(), "ota", "evt_1")
			if err != nil || len(as) != c.records || as[len(as)-1].Error != "" || as[len(as)-1].Status/100 != 2 {
				t.Errorf("attempts recorded: %+v (%v), want %d, the last a success", as, err, c.records)
			}
		})
	}
}

// TestDispatch_SlowFailingRecordHandsOffOnce: the downstream takes an event and its
// attempt's record takes its time to fail (a full disk), while the job's lease runs
// out and the job is leased again. The new lease finds the attempt's outcome neither
// under way nor kept yet: it must wait for it, not hand the event off again.
func TestDispatch_SlowFailingRecordHandsOffOnce(t *testing.T) {
	ds, st := newFullDisk(t)
	db := st.DB
	st.full.Store(true)
	st.hold = make(chan struct{})
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 5)},
		Poll: 10 * time.Millisecond, FirstBackoff: 10 * time.Millisecond, Now: now})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	released := false
	release := func() {
		if !released {
			released = true
			close(st.hold)
		}
	}
	t.Cleanup(func() { release(); cancel(); <-done })

	requests := func() int {
		ds.mu.Lock()
		defer ds.mu.Unlock()
		return ds.requests
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		if requests() == 0 {
			return errors.New("no hand-off yet")
		}
		return nil
	})
	// The record now hangs; the lease runs out and the job is leased again.
	skew.Store(int64(time.Hour))
	storagetest.Eventually(t, 10*time.Second, func() error {
		if st.leases.Load() < 2 {
			return errors.New("not leased again yet")
		}
		return nil
	})
	// A second hand-off would start at once: give it the time it would take.
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline) && requests() < 2; {
		time.Sleep(5 * time.Millisecond)
	}
	release()
	st.full.Store(false)
	waitState(t, db, "evt_1", storage.StateProcessed)
	if n := requests(); n != 1 {
		t.Errorf("the downstream took ota:evt_1 %d times; want once", n)
	}
}

// waitFailures waits for st's n-th failed record, for at most 10 s.
func waitFailures(t *testing.T, st *fullDisk, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); st.failures.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d records failed in 10 s, want %d: a failed record is not tried again", st.failures.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDispatch_LeaseFailuresLoggedSeldom: while every lease fails alike (a full disk)
// and a key is due, the dispatcher backs off and logs the failure at most once a
// minute (outage.Every), not on every turn of its loop.
func TestDispatch_LeaseFailuresLoggedSeldom(t *testing.T) {
	ds, st := newFullDisk(t)
	st.leaseFull.Store(true)
	var logs syncBuffer
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 5)},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	time.Sleep(2 * time.Second)
	cancel()
	<-done
	if n := strings.Count(logs.String(), "lease failed"); n != 1 {
		t.Errorf("%d \"lease failed\" lines in 2 s of failed leases, want 1:\n%s", n, logs.String())
	}
}
