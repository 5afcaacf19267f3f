package receiver_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// sizedSweep is the real database, whose claims sweep notes the limit of each batch
// and holds each at least hold, as a batch does on a file beyond the page cache.
type sizedSweep struct {
	*sqlite.DB
	hold   time.Duration
	mu     sync.Mutex
	limits []int
	done   chan struct{}
}

func (s *sizedSweep) SweepExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	n, err := s.DB.SweepExpired(ctx, now, limit)
	time.Sleep(s.hold)
	s.mu.Lock()
	s.limits = append(s.limits, limit)
	s.mu.Unlock()
	if n < int64(limit) || err != nil {
		select {
		case s.done <- struct{}{}:
		default:
		}
	}
	return n, err
}

// sweepLimits runs the sweeps over keys expired claims until the claims sweep has
// deleted them all, and returns the limit of each of its batches.
func sweepLimits(t *testing.T, keys int, hold time.Duration, cfg receiver.SweepConfig) []int {
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
	s := &sizedSweep{DB: db, hold: hold, done: make(chan struct{}, 1)}
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
	return slices.Clone(s.limits)
}

// TestSweeps_BatchSizedByTime: a batch that holds the write lock longer than BatchTime
// makes the next one no larger than MinBatch, however large Batch; batches well within
// BatchTime grow, at most twice over from one to the next, up to Batch.
func TestSweeps_BatchSizedByTime(t *testing.T) {
	t.Run("Slow", func(t *testing.T) {
		// Every batch holds the lock 30 times BatchTime: the sweep never sends intake
		// behind a batch of Batch rows, and goes on at MinBatch rows a batch.
		limits := sweepLimits(t, 3*receiver.MinBatch+7, 30*time.Millisecond,
			receiver.SweepConfig{Every: time.Hour, Batch: 1000, BatchTime: time.Millisecond, Pause: time.Millisecond})
		want := []int{receiver.MinBatch, receiver.MinBatch, receiver.MinBatch, receiver.MinBatch}
		if !slices.Equal(limits, want) {
			t.Errorf("batches of %v rows, want %v", limits, want)
		}
	})
	t.Run("Fast", func(t *testing.T) {
		// Every batch is far within BatchTime: each doubles the last, up to Batch.
		limits := sweepLimits(t, 1000, 0,
			receiver.SweepConfig{Every: time.Hour, Batch: 300, BatchTime: time.Hour, Pause: time.Millisecond})
		want := []int{receiver.MinBatch, 2 * receiver.MinBatch, 300, 300, 300}
		if !slices.Equal(limits, want) {
			t.Errorf("batches of %v rows, want %v", limits, want)
		}
	})
}
