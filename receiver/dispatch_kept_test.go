package receiver_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestDispatch_ShutdownSaysKeptOutcome: an attempt in flight when the dispatcher stops
// hands the event off and its record fails (a full disk): once the attempts are over,
// Run says that the event is handed off again after a restart.
func TestDispatch_ShutdownSaysKeptOutcome(t *testing.T) {
	ds := newDownstream(t, 0, map[int]time.Duration{1: 150 * time.Millisecond})
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	accept(t, db, "evt_1", `{"id":"evt_1"}`)
	st := &fullDisk{DB: db}
	st.full.Store(true)
	var logs syncBuffer
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 5)},
		Poll: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	// Wait for the hand-off to be under way, then stop.
	for deadline := time.Now().Add(5 * time.Second); ; {
		ds.mu.Lock()
		n := ds.requests
		ds.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no hand-off in 5 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	<-done
	if st.failures.Load() == 0 {
		t.Fatal("the in-flight attempt's record was never tried")
	}
	if !strings.Contains(logs.String(), "attempt not recorded at shutdown") {
		t.Errorf("an attempt whose record failed during shutdown is kept, but no shutdown line says it is handed off again after a restart:\n%s", logs.String())
	}
}

// reprocessStore leases job j1 first and then j2, the same key reprocessed (another
// updated_at, attempts 0); its first two FinishAttempt calls fail as a full disk does.
type reprocessStore struct {
	receiver.DispatchStore
	mu       sync.Mutex
	leases   int
	finishes []storage.Attempt // successful records
	calls    int
	j1, j2   storage.Job
}

// LeaseFirstDue is LeaseDue: it leases one job at most, the first due of its source.
func (s *reprocessStore) LeaseFirstDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	return s.LeaseDue(ctx, now, lease, limit, sources)
}

func (s *reprocessStore) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(sources) == 0 {
		return nil, nil
	}
	s.leases++
	switch s.leases {
	case 1:
		return []storage.Job{s.j1}, nil
	case 2:
		return []storage.Job{s.j2}, nil
	}
	return nil, nil
}

func (s *reprocessStore) FinishAttempt(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= 2 {
		return false, errDiskFull
	}
	s.finishes = append(s.finishes, a)
	return true, nil
}

func (s *reprocessStore) NextDue(context.Context, []string) (time.Time, error) {
	return time.Time{}, nil
}
func (s *reprocessStore) DispatcherSeen(context.Context, string, []string, time.Time) error {
	return nil
}
func (s *reprocessStore) ForwardedSources(context.Context, time.Time) ([]string, error) {
	return nil, nil
}
func (s *reprocessStore) StuckCounts(context.Context, time.Time) (map[string]int, error) {
	return nil, nil
}

// storedJob is ota:evt_1's job as leased a minute after its claim, its payload stored.
func storedJob(now time.Time) storage.Job {
	return storage.Job{ClaimID: 1, Source: "ota", Key: "evt_1", Delivery: 1, Generation: now.Add(-time.Minute),
		Updated: now.Add(-time.Minute), Lease: now.Add(time.Minute), Stored: true, DeliverySource: "ota", DeliveryKey: "evt_1",
		ContentType: "application/json", Body: []byte(`{"id":"evt_1"}`)}
}

// runDispatcherFor runs a dispatcher of one worker on st, forwarding to ds, for d, and
// returns its log.
func runDispatcherFor(t *testing.T, st receiver.DispatchStore, ds *downstream, d time.Duration) *syncBuffer {
	t.Helper()
	logs := &syncBuffer{}
	disp := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 5)},
		Poll: 10 * time.Millisecond, Workers: 1, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { disp.Run(ctx); close(done) }()
	time.Sleep(d)
	cancel()
	<-done
	return logs
}

// TestDispatch_KeptOutcomeOfAnotherJob: an attempt hands the event off and its record
// fails; before it is recorded the key is leased again as another job (a reprocess).
// The kept outcome is recorded against its own job, which leaves the key to the new
// one and puts the hand-off in the key's history.
func TestDispatch_KeptOutcomeOfAnotherJob(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	now := time.Now()
	j1 := storedJob(now)
	j2 := j1
	j2.Updated, j2.Lease = now, now.Add(2*time.Minute)
	st := &reprocessStore{j1: j1, j2: j2}
	logs := runDispatcherFor(t, st, ds, 1500*time.Millisecond)
	st.mu.Lock()
	defer st.mu.Unlock()
	if n := ds.received()["ota:evt_1"]; n != 2 {
		t.Fatalf("downstream took the key %d times; this test wants the two jobs each handed off", n)
	}
	if len(st.finishes) != 2 {
		t.Errorf("%d attempts recorded of 2 hand-offs, want each job's outcome recorded:\n%s", len(st.finishes), logs.String())
	}
}

// goneStore leases j1 once; its first record fails as a full disk does, and every
// write after that finds the database file gone from its path.
type goneStore struct {
	reprocessStore
}

// LeaseFirstDue is LeaseDue: it leases one job at most, the first due of its source.
func (s *goneStore) LeaseFirstDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	return s.LeaseDue(ctx, now, lease, limit, sources)
}

func (s *goneStore) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(sources) == 0 {
		return nil, nil
	}
	s.leases++
	if s.leases == 1 {
		return []storage.Job{s.j1}, nil
	}
	return nil, fmt.Errorf("lease jobs: %w", storage.ErrFileGone)
}

func (s *goneStore) FinishAttempt(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls == 1 {
		return false, errDiskFull
	}
	return false, fmt.Errorf("finish attempt: %w", storage.ErrFileGone)
}

// TestDispatch_KeptOutcomeFileGone: a kept outcome that cannot be recorded because the
// database file left its path is said to be handed off again after a restart.
func TestDispatch_KeptOutcomeFileGone(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	st := &goneStore{reprocessStore{j1: storedJob(time.Now())}}
	logs := runDispatcherFor(t, st, ds, 800*time.Millisecond)
	st.mu.Lock()
	calls := st.calls
	st.mu.Unlock()
	if calls < 2 {
		t.Fatalf("the kept outcome was never recorded again (%d records)", calls)
	}
	out := logs.String()
	if !strings.Contains(out, "attempt not recorded: the database file") && !strings.Contains(out, "attempt not recorded at shutdown") {
		t.Errorf("the kept outcome was dropped when the file left, and no line says it is not recorded:\n%s", out)
	}
}

// flakyLeaseStore fails leases 1-4 and 8, and leases one job at each of 5-7.
type flakyLeaseStore struct {
	reprocessStore
	at []time.Time
}

// LeaseFirstDue is LeaseDue: it leases one job at most, the first due of its source.
func (s *flakyLeaseStore) LeaseFirstDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	return s.LeaseDue(ctx, now, lease, limit, sources)
}

func (s *flakyLeaseStore) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(sources) == 0 {
		return nil, nil
	}
	s.at = append(s.at, time.Now())
	n := len(s.at)
	switch {
	case n <= 4 || n == 8:
		return nil, errDiskFull
	case n <= 7:
		j := s.j1
		j.Key = fmt.Sprintf("evt_%d", n)
		j.DeliveryKey = j.Key
		return []storage.Job{j}, nil
	}
	return nil, nil
}

func (s *flakyLeaseStore) FinishAttempt(context.Context, storage.Job, storage.Attempt, storage.AttemptResult) (bool, error) {
	return true, nil
}

// TestDispatch_LeaseBackoffResets: a lease that takes jobs ends the back-off of the
// leases that failed before it: the next failure waits the first step again.
func TestDispatch_LeaseBackoffResets(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	now := time.Now()
	j1 := storage.Job{ClaimID: 1, Source: "ota", Key: "evt_1", Delivery: 1, Generation: now, Updated: now,
		Lease: now.Add(time.Minute), Stored: true, DeliverySource: "ota", DeliveryKey: "evt_1",
		ContentType: "application/json", Body: []byte(`{}`)}
	st := &flakyLeaseStore{reprocessStore: reprocessStore{j1: j1}}
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 5)},
		Poll: 10 * time.Millisecond, Workers: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	deadline := time.Now().Add(8 * time.Second)
	for {
		st.mu.Lock()
		n := len(st.at)
		st.mu.Unlock()
		if n >= 9 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.at) < 9 {
		t.Fatalf("%d leases in 8 s", len(st.at))
	}
	if gap := st.at[8].Sub(st.at[7]); gap > 500*time.Millisecond {
		t.Errorf("after leases that took jobs, one failed lease waited %s before the next, want about 100 ms", gap)
	}
}
