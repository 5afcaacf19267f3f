package receiver_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_LeaseBatchNotBoundByAFullerSource: the lease of a loop turn was bounded
// by the room of the fullest source that could start an attempt: with ota holding 6 of
// 8 workers, room for one more, the two events due of the source with nothing under
// way were leased one a turn, a lease round trip each, though two workers were free and
// both its own to take. Both must be leased at once.
func TestDispatch_LeaseBatchNotBoundByAFullerSource(t *testing.T) {
	db := storagetest.Open(t)
	ota, pms := newHungDownstream(t), newHungDownstream(t)
	defer ota.release()
	defer pms.release()
	src := forwardSource(t, ota.srv.URL, 10)
	src.AttemptTimeout = time.Minute
	other := forwardSource(t, pms.srv.URL, 10)
	other.Name, other.AttemptTimeout = "pms", time.Minute
	for n := range 6 {
		queue(t, db, "ota", fmt.Sprintf("evt_%d", n))
	}
	st := &leaseLog{DB: db}
	d := runSharedDispatcher(t, db, 8, st, src, other)
	holdingAsleep(t, st, ota, "ota", 6)
	// Asleep until woken (Poll is a minute): its next lease sees both events due.
	queue(t, db, "pms", "evt_a")
	queue(t, db, "pms", "evt_b")
	d.Wake()
	storagetest.Eventually(t, 10*time.Second, func() error {
		if n := pms.open(); n != 2 {
			return fmt.Errorf("%d hand-offs to pms under way; want its 2", n)
		}
		return nil
	})
	if got := st.batches("pms"); !slices.Equal(got, []int{2}) {
		t.Errorf("pms's 2 due events were leased in batches of %v; want both in one lease", got)
	}
}

// leaseLog is a database that notes how many jobs of each source every lease took, and
// how often the dispatcher looked for the next job due, before it sleeps.
type leaseLog struct {
	*sqlite.DB
	mu    sync.Mutex
	taken []map[string]int
	next  int
}

func (l *leaseLog) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	jobs, err := l.DB.LeaseDue(ctx, now, lease, limit, sources)
	l.note(jobs)
	return jobs, err
}

func (l *leaseLog) LeaseFirstDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	jobs, err := l.DB.LeaseFirstDue(ctx, now, lease, limit, sources)
	l.note(jobs)
	return jobs, err
}

// note notes how many jobs of each source a lease took.
func (l *leaseLog) note(jobs []storage.Job) {
	by := map[string]int{}
	for _, j := range jobs {
		by[j.Source]++
	}
	l.mu.Lock()
	l.taken = append(l.taken, by)
	l.mu.Unlock()
}

func (l *leaseLog) NextDue(ctx context.Context, sources []string) (time.Time, error) {
	next, err := l.DB.NextDue(ctx, sources)
	l.mu.Lock()
	l.next++
	l.mu.Unlock()
	return next, err
}

// looks is how often the dispatcher looked for the next job due.
func (l *leaseLog) looks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// batches lists how many jobs of source each lease that took any took.
func (l *leaseLog) batches(source string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, by := range l.taken {
		if by[source] > 0 {
			out = append(out, by[source])
		}
	}
	return out
}

// TestDispatch_IdleSourcesLeasedTogetherWhenNoWorkerIsSpare: with one source's burst
// holding every worker that no other source is owed, each of the others with an event
// due was leased a turn of its own, one lease round trip after another: beside a
// hundred quiet sources, the last event waited for a hundred leases. Every free worker
// is owed to one of them, so each may take one job: they are leased at once.
func TestDispatch_IdleSourcesLeasedTogetherWhenNoWorkerIsSpare(t *testing.T) {
	const quietSources = 20
	db := storagetest.Open(t)
	busy, quiet, sources := busyBeside(t, db, quietSources)
	defer busy.release() // before the dispatcher stops: it waits for the hand-offs under way
	defer quiet.release()
	isQuiet := map[string]bool{}
	for _, q := range sources[1:] {
		isQuiet[q.Name] = true
	}
	st := &leaseLog{DB: db}
	d := runSharedDispatcher(t, db, 0, st, sources...) // the default workers: 8 + 19
	holdingAsleep(t, st, busy, "busy", 7)
	for i := range quietSources {
		queue(t, db, fmt.Sprintf("quiet%d", i), "evt")
	}
	d.Wake()
	storagetest.Eventually(t, 10*time.Second, func() error {
		if n := quiet.open(); n != quietSources {
			return fmt.Errorf("%d hand-offs of the quiet sources under way; want %d, one each", n, quietSources)
		}
		return nil
	})
	leases := 0
	st.mu.Lock()
	for _, by := range st.taken {
		for s := range by {
			if isQuiet[s] {
				leases++
				break
			}
		}
	}
	st.mu.Unlock()
	if leases != 1 {
		t.Errorf("the %d quiet sources' events were leased in %d leases; want one, a worker owed to each", quietSources, leases)
	}
	if n := busy.open(); n != 7 {
		t.Errorf("%d hand-offs of the busy source under way; want still 7", n)
	}
}

// TestDispatch_BurstLeavesTheOtherIdleSourcesTheirWorkers: all sources idle, one with a
// burst older than the others' events: the first lease takes the burst up to the spare
// workers and one more, and the other sources, each owed one of the workers left, are
// leased a job each together in the same turn, not one a lease.
func TestDispatch_BurstLeavesTheOtherIdleSourcesTheirWorkers(t *testing.T) {
	db := storagetest.Open(t)
	busy, quiet, sources := busyBeside(t, db, 4)
	defer busy.release() // before the dispatcher stops: it waits for the hand-offs under way
	defer quiet.release()
	for i := range 4 {
		queue(t, db, fmt.Sprintf("quiet%d", i), "evt")
	}
	st := &leaseLog{DB: db}
	runSharedDispatcher(t, db, 0, st, sources...) // the default workers: 8 + 3
	storagetest.Eventually(t, 10*time.Second, func() error {
		if n := quiet.open(); n != 4 {
			return fmt.Errorf("%d hand-offs of the quiet sources under way; want 4, one each", n)
		}
		if n := busy.open(); n != 7 {
			return fmt.Errorf("%d hand-offs of the busy source under way; want 7", n)
		}
		return nil
	})
	for i := range 4 {
		if got := st.batches(fmt.Sprintf("quiet%d", i)); !slices.Equal(got, []int{1}) {
			t.Errorf("quiet%d's event leased in batches of %v; want one", i, got)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var leases []map[string]int
	for _, by := range st.taken {
		if len(by) > 0 {
			leases = append(leases, by)
		}
	}
	if len(leases) != 2 {
		t.Errorf("the jobs were leased in %d leases, %v; want 2: the burst's 7, then one of each quiet source", len(leases), leases)
	}
}

// busyBeside makes a source "busy", with 12 events queued, and quiet ones quiet0 …
// (none queued), each with a downstream that hangs: busy's, and one the quiet ones
// share. sources holds busy first.
func busyBeside(t *testing.T, db *sqlite.DB, quiet int) (busyDS, quietDS *hungDownstream, sources []receiver.Source) {
	t.Helper()
	busyDS, quietDS = newHungDownstream(t), newHungDownstream(t)
	src := forwardSource(t, busyDS.srv.URL, 10)
	src.Name, src.AttemptTimeout = "busy", time.Minute
	sources = []receiver.Source{src}
	for i := range quiet {
		q := forwardSource(t, quietDS.srv.URL, 10)
		q.Name, q.AttemptTimeout = fmt.Sprintf("quiet%d", i), time.Minute
		sources = append(sources, q)
	}
	for n := range 12 {
		queue(t, db, "busy", fmt.Sprintf("evt_%d", n))
	}
	return busyDS, quietDS, sources
}

// holdingAsleep waits until ds holds n hand-offs of source and the dispatcher, having
// leased, has gone to sleep: its next lease is the one the test wakes it for.
func holdingAsleep(t *testing.T, st *leaseLog, ds *hungDownstream, source string, n int) {
	t.Helper()
	storagetest.Eventually(t, 10*time.Second, func() error {
		if got := ds.open(); got != n {
			return fmt.Errorf("%d hand-offs of %s under way; want %d", got, source, n)
		}
		if st.looks() == 0 {
			return fmt.Errorf("the dispatcher has not gone to sleep")
		}
		return nil
	})
}
