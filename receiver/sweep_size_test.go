package receiver_test

import (
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
)

// sweepLimits runs the sweeps over keys expired claims until the claims sweep has
// deleted them all, and returns the limit of each of its batches.
func sweepLimits(t *testing.T, keys int, hold time.Duration, cfg receiver.SweepConfig) []int {
	t.Helper()
	return slices.Clone(sweepExpiredClaims(t, keys, hold, cfg).limits)
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
