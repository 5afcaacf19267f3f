package receiver_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// stallAfterLease is a dispatcher's store over a real database whose first lease that
// takes a job is followed by a stall of the process: the clock moves past the lease's
// end, and meanwhile (when set) runs what another replica does in that time.
type stallAfterLease struct {
	*sqlite.DB
	clock     *hostileClock
	stall     time.Duration
	meanwhile func()
	once      sync.Once
}

func (s *stallAfterLease) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	jobs, err := s.DB.LeaseDue(ctx, now, lease, limit, sources)
	if len(jobs) > 0 {
		s.once.Do(func() {
			s.clock.Add(s.stall)
			if s.meanwhile != nil {
				s.meanwhile()
			}
		})
	}
	return jobs, err
}

func runDispatcherOn(t *testing.T, st receiver.DispatchStore, clock *hostileClock, src receiver.Source) func() {
	t.Helper()
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{src},
		FirstBackoff: 40 * time.Millisecond, Poll: 20 * time.Millisecond, Now: clock.Now})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return stop
}

// TestDispatch_StalledPastLeaseSendsNothing: a replica leases a key and stalls before
// its hand-off (a paused virtual machine) until its lease has run out; another replica
// leases the key meanwhile and hands it off. The first, woken, must not hand it off a
// second time under a lease that is no longer its own. A lone dispatcher whose clock
// leapt forward past the lease gives the lease back unused and hands the event off
// once, with one attempt in the key's history and no interrupted one.
func TestDispatch_StalledPastLeaseSendsNothing(t *testing.T) {
	t.Run("AnotherReplicaSentIt", func(t *testing.T) {
		ds := newDownstream(t, 0, nil)
		src := forwardSource(t, ds.srv.URL, 5)
		db := storagetest.Open(t)
		clock := &hostileClock{}
		db.Now = clock.Now
		accept(t, db, "evt_1", `{"n":1}`)
		st := &stallAfterLease{DB: db, clock: clock, stall: time.Minute}
		st.meanwhile = func() {
			stop := runDispatcherOn(t, db, clock, src)
			waitState(t, db, "evt_1", "processed")
			stop()
		}
		runDispatcherOn(t, st, clock, src)
		waitState(t, db, "evt_1", "processed")
		time.Sleep(200 * time.Millisecond) // the stalled replica has woken and gone on
		if n := ds.arrived(); n != 1 {
			t.Errorf("the event reached the downstream %d times, want once: the stalled replica sent it under a lease run out", n)
		}
	})
	t.Run("ClockLeaptPastTheLease", func(t *testing.T) {
		ds := newDownstream(t, 0, nil)
		src := forwardSource(t, ds.srv.URL, 5)
		db := storagetest.Open(t)
		clock := &hostileClock{}
		db.Now = clock.Now
		accept(t, db, "evt_1", `{"n":1}`)
		runDispatcherOn(t, &stallAfterLease{DB: db, clock: clock, stall: 48 * time.Hour}, clock, src)
		waitState(t, db, "evt_1", "processed")
		if n := ds.arrived(); n != 1 {
			t.Errorf("the event reached the downstream %d times, want once", n)
		}
		as, err := db.Attempts(context.Background(), "ota", "evt_1")
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != 1 || as[0].Error != "" || strings.HasPrefix(as[0].Error, "interrupted") {
			t.Errorf("history %+v, want the one hand-off, succeeded", as)
		}
	})
}
