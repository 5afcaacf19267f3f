package receiver

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/outage"
)

// Sweeper is what the background sweeps need of storage.
type Sweeper interface {
	SweepExpired(ctx context.Context, now time.Time, limit int) (int64, error)
	SweepDeliveries(ctx context.Context, now, cutoff time.Time, from storage.SweepCursor, limit int) (int64, storage.SweepCursor, error)
	SweepRejectionCounts(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	ClockReference
}

// SweepConfig tunes RunSweeps.
type SweepConfig struct {
	Every time.Duration // between sweeps; default 1m
	Batch int           // most rows per DELETE; default 1000
	// BatchTime is how long a batch aims to hold the write lock, which intake's
	// commits wait for: each batch is sized from how long the last one took, between
	// MinBatch (at most Batch) and Batch rows; default 5ms.
	BatchTime time.Duration
	Pause     time.Duration // between batches, so intake's writes get the lock, and at least as long as the batch took; default 20ms
	Retention time.Duration // deliveries (unless still owed downstream) and resolved alerts older than this go; 0 keeps them
	// Remember is how long traces of expired keys are kept (0 keeps them);
	// BusinessWindow and CorrelationWindow are the longest windows configured: business
	// and correlation keys older than that are matched by nothing and go.
	Remember, BusinessWindow, CorrelationWindow time.Duration
	Now                                         func() time.Time
	// ClockStepHold is how long the sweeps hold their deletes after the clock leapt
	// forward, unless it is set right first (clockGuard); default DefaultClockStepHold.
	ClockStepHold time.Duration
}

// RunSweeps deletes expired claims, and deliveries, counts of rejections not stored
// individually and resolved alerts past retention, until ctx ends. Each DELETE is bounded
// to one batch, sized to hold the write lock for about BatchTime, and it pauses between
// batches, so intake never waits behind a sweep for more than one short batch. A
// delivery whose payload is still owed downstream is kept past retention
// (storage.SweepDeliveries says which are). Nothing is deleted while the clock stands
// far ahead of where it was (clockGuard).
func RunSweeps(ctx context.Context, st Sweeper, cfg SweepConfig, m *Metrics, log *slog.Logger) {
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.BatchTime <= 0 {
		cfg.BatchTime = 5 * time.Millisecond
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 20 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ClockStepHold <= 0 {
		cfg.ClockStepHold = DefaultClockStepHold
	}
	log = log.With(logComponent, "sweep")
	guard := clockGuard{hold: cfg.ClockStepHold, mono: time.Now}
	// While the database cannot store or be reached, every sweep of every round fails
	// alike, at every round for as long as that lasts.
	fails := outage.New(log, slog.LevelWarn, "sweep failed", "sweeps work again")
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		now := cfg.Now()
		deletes, err := guard.deletes(ctx, st, now, cfg.Retention, m, log)
		if !deletes {
			if ctx.Err() == nil {
				fails.Note(time.Now(), err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				continue
			}
		}
		// The round's first failure stands for the others: they have its cause.
		failed, at := err, []any{} // the clock's mark failed (clockGuard.deletes), or a sweep
		sweep := func(table string, batch func(limit int) (int64, bool, error)) {
			if err := sweepTable(ctx, table, batch, cfg, m, log); err != nil && failed == nil {
				failed, at = err, []any{logTable, table}
			}
		}
		sweep("claims", func(limit int) (int64, bool, error) {
			n, err := st.SweepExpired(ctx, now, limit)
			return n, n >= int64(limit), err
		})
		if cfg.Retention > 0 {
			var from storage.SweepCursor
			sweep("deliveries", func(limit int) (int64, bool, error) {
				n, next, err := st.SweepDeliveries(ctx, now, now.Add(-cfg.Retention), from, limit)
				from = next
				return n, !next.Done(), err
			})
			sweep("rejection_counts", func(limit int) (int64, bool, error) {
				n, err := st.SweepRejectionCounts(ctx, now.Add(-cfg.Retention), limit)
				return n, n >= int64(limit), err
			})
			if as, ok := st.(AlertSweeper); ok {
				// Resolved alerts are history, as deliveries are: kept as long, and
				// about deliveries that are gone after that anyway.
				sweep("alerts", func(limit int) (int64, bool, error) {
					n, err := as.SweepAlerts(ctx, now.Add(-cfg.Retention), limit)
					return n, n >= int64(limit), err
				})
			}
		}
		if fs, ok := st.(ForensicSweeper); ok {
			sweepForensics(ctx, fs, now, cfg, sweep)
		}
		if ctx.Err() == nil {
			fails.Note(time.Now(), failed, at...)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// AlertSweeper is what the sweep of resolved alerts needs of storage; a Sweeper that is
// one too gets them swept past Retention, with their notifications.
type AlertSweeper interface {
	SweepAlerts(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// ForensicSweeper is what the sweeps of forensic rows need of storage; a Sweeper that
// is one too gets them swept.
type ForensicSweeper interface {
	SweepTraces(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	SweepBusinessKeys(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	SweepCorrelationKeys(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// sweepForensics deletes traces past Remember and business and correlation keys past
// the longest windows, in bounded batches. Traces are kept for ever when Remember is 0;
// keys at least a day, so that those of a window since removed still go.
func sweepForensics(ctx context.Context, st ForensicSweeper, now time.Time, cfg SweepConfig, sweep func(table string, batch func(limit int) (int64, bool, error))) {
	for _, s := range []struct {
		table string
		keep  time.Duration
		fn    func(context.Context, time.Time, int) (int64, error)
	}{
		{"key_traces", cfg.Remember, st.SweepTraces},
		{"business_keys", max(cfg.BusinessWindow, 24*time.Hour), st.SweepBusinessKeys},
		{"correlation_keys", max(cfg.CorrelationWindow, 24*time.Hour), st.SweepCorrelationKeys},
	} {
		if s.keep <= 0 {
			continue
		}
		sweep(s.table, func(limit int) (int64, bool, error) {
			n, err := s.fn(ctx, now.Add(-s.keep), limit)
			return n, n >= int64(limit), err
		})
	}
}

// MinBatch is the fewest rows a batch is sized down to (Batch, when smaller). Each
// batch pays for its transaction and commit whatever its size: on a disk whose fsync
// alone takes longer than BatchTime, batches sized down to a few rows would leave the
// sweep far behind the keys expiring.
const MinBatch = 100

// batchSize sizes the next batch from the last, which deleted up to size rows in took
// (its wait for the write lock included, which errs on intake's side), so that the next
// holds the lock about target, between lo and hi rows. A batch grows at most twice over
// from one to the next, as a quick batch (pages in the cache) says little about the
// next; it shrinks at once.
func batchSize(size int, took, target time.Duration, lo, hi int) int {
	next := hi
	if took > 0 {
		next = int(min(float64(size)*float64(target)/float64(took), float64(hi)))
	}
	return max(min(next, 2*size, hi), lo)
}

// sweepTable runs batch until it says there is no more to do, or fails; batch deletes
// at most limit rows and returns how many it deleted and whether another batch may
// find more. A failure is returned for RunSweeps to log, once for the round.
func sweepTable(ctx context.Context, table string, batch func(limit int) (int64, bool, error), cfg SweepConfig, m *Metrics, log *slog.Logger) error {
	var total int64
	lo := min(MinBatch, cfg.Batch)
	size := lo
	for ctx.Err() == nil {
		start := time.Now()
		n, more, err := batch(size)
		took := time.Since(start)
		if err != nil {
			if total > 0 {
				log.Info("swept", logTable, table, logDeleted, total)
			}
			return err
		}
		total += n
		m.SweepDeleted.WithLabelValues(table).Add(float64(n))
		if !more {
			break
		}
		size = batchSize(size, took, cfg.BatchTime, lo, cfg.Batch)
		// Pause at least as long as the batch held the write lock: a batch grown
		// costly (traces of expired keys, a file beyond the page cache) then takes at
		// most about half of the lock's time, and intake's commits the rest.
		select {
		case <-ctx.Done():
		case <-time.After(max(cfg.Pause, took)):
		}
	}
	if total > 0 {
		log.Info("swept", logTable, table, logDeleted, total)
	}
	return nil
}
