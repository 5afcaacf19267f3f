package receiver_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// slowSweep is the real database whose claims sweep takes at least hold a batch, as a
// batch does on a file beyond the page cache; it notes the limit of each batch, and
// when each began and ended.
type slowSweep struct {
	*sqlite.DB
	hold       time.Duration
	mu         sync.Mutex
	limits     []int
	start, end []time.Time
	done       chan struct{}
}

func (s *slowSweep) SweepExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	began := time.Now()
	n, err := s.DB.SweepExpired(ctx, now, limit)
	time.Sleep(s.hold)
	s.mu.Lock()
	s.limits = append(s.limits, limit)
	s.start, s.end = append(s.start, began), append(s.end, time.Now())
	s.mu.Unlock()
	if n < int64(limit) || err != nil {
		select {
		case s.done <- struct{}{}:
		default:
		}
	}
	return n, err
}

// sweepExpiredClaims runs the sweeps over keys expired claims, each batch of the claims
// sweep held at least hold, until that sweep has deleted them all, and returns what it
// noted.
func sweepExpiredClaims(t *testing.T, keys int, hold time.Duration, cfg receiver.SweepConfig) *slowSweep {
	t.Helper()
	ctx := context.Background()
	db := storagetest.Open(t)
	err := storagetest.BulkLoad(ctx, db, storagetest.Fill{Source: "ota", Keys: keys,
		Key:       func(i int) string { return fmt.Sprintf("evt_%06d", i) },
		ClaimedAt: time.Now().Add(-48 * time.Hour), TTL: 24 * time.Hour,
		Headers: "{}", Body: func(int) []byte { return []byte(`{}`) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &slowSweep{DB: db, hold: hold, done: make(chan struct{}, 1)}
	sweepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		receiver.RunSweeps(sweepCtx, s, cfg, receiver.NewMetrics(nil), slog.New(slog.DiscardHandler))
		close(stopped)
	}()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the claims sweep did not finish within 60 s")
	}
	cancel()
	<-stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	return s
}

// TestSweeps_PauseAtLeastTheBatch: between two batches the sweep leaves the write lock
// to intake for at least as long as the last batch held it, however short its
// configured pause, so that a costly sweep takes at most about half of the lock's time.
func TestSweeps_PauseAtLeastTheBatch(t *testing.T) {
	s := sweepExpiredClaims(t, 7, 80*time.Millisecond,
		receiver.SweepConfig{Every: time.Hour, Batch: 2, Pause: time.Millisecond})
	if len(s.start) < 4 {
		t.Fatalf("%d batches, want 4 (7 claims, 2 a batch)", len(s.start))
	}
	for i := 1; i < len(s.start); i++ {
		took, gap := s.end[i-1].Sub(s.start[i-1]), s.start[i].Sub(s.end[i-1])
		if gap < took {
			t.Errorf("batch %d began %v after batch %d ended, which took %v: the sweep paused less than its batch held the lock", i+1, gap, i, took)
		}
	}
}
