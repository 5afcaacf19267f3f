package receiver_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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
	storagetest.Eventually(t, 10*time.Second, func() error {
		if n := ota.open(); n != 6 {
			return fmt.Errorf("%d hand-offs to ota under way; want its 6", n)
		}
		if st.looks() == 0 {
			return fmt.Errorf("the dispatcher has not gone to sleep")
		}
		return nil
	})
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
	by := map[string]int{}
	for _, j := range jobs {
		by[j.Source]++
	}
	l.mu.Lock()
	l.taken = append(l.taken, by)
	l.mu.Unlock()
	return jobs, err
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
