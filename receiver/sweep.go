package receiver

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// Sweeper is what the background sweeps need of storage.
type Sweeper interface {
	SweepExpired(ctx context.Context, now time.Time, limit int) (int64, error)
	SweepDeliveries(ctx context.Context, now, cutoff time.Time, from storage.SweepCursor, limit int) (int64, storage.SweepCursor, error)
	SweepRejectionCounts(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// SweepConfig tunes RunSweeps.
type SweepConfig struct {
	Every     time.Duration // between sweeps; default 1m
	Batch     int           // rows per DELETE; default 1000
	Pause     time.Duration // between batches, so intake's writes get the lock, and at least as long as the batch took; default 20ms
	Retention time.Duration // deliveries (unless still owed downstream) and resolved alerts older than this go; 0 keeps them
	// Remember is how long traces of expired keys are kept (0 keeps them);
	// BusinessWindow and CorrelationWindow are the longest windows configured: business
	// and correlation keys older than that are matched by nothing and go.
	Remember, BusinessWindow, CorrelationWindow time.Duration
	Now                                         func() time.Time
}

// RunSweeps deletes expired claims, and deliveries, counts of rejections not stored
// individually and resolved alerts past retention, until ctx ends. Each DELETE is bounded to one batch, and
// it pauses between batches, so intake never waits behind a sweep for more than one
// batch. A delivery whose payload is still owed downstream is kept past retention
// (storage.SweepDeliveries says which are).
func RunSweeps(ctx context.Context, st Sweeper, cfg SweepConfig, m *Metrics, log *slog.Logger) {
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 20 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log = log.With(logComponent, "sweep")
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		now := cfg.Now()
		sweep(ctx, "claims", func() (int64, bool, error) {
			n, err := st.SweepExpired(ctx, now, cfg.Batch)
			return n, n >= int64(cfg.Batch), err
		}, cfg, m, log)
		if cfg.Retention > 0 {
			var from storage.SweepCursor
			sweep(ctx, "deliveries", func() (int64, bool, error) {
				n, next, err := st.SweepDeliveries(ctx, now, now.Add(-cfg.Retention), from, cfg.Batch)
				from = next
				return n, !next.Done(), err
			}, cfg, m, log)
			sweep(ctx, "rejection_counts", func() (int64, bool, error) {
				n, err := st.SweepRejectionCounts(ctx, now.Add(-cfg.Retention), cfg.Batch)
				return n, n >= int64(cfg.Batch), err
			}, cfg, m, log)
			if as, ok := st.(AlertSweeper); ok {
				// Resolved alerts are history, as deliveries are: kept as long, and
				// about deliveries that are gone after that anyway.
				sweep(ctx, "alerts", func() (int64, bool, error) {
					n, err := as.SweepAlerts(ctx, now.Add(-cfg.Retention), cfg.Batch)
					return n, n >= int64(cfg.Batch), err
				}, cfg, m, log)
			}
		}
		if fs, ok := st.(ForensicSweeper); ok {
			sweepForensics(ctx, fs, now, cfg, m, log)
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
func sweepForensics(ctx context.Context, st ForensicSweeper, now time.Time, cfg SweepConfig, m *Metrics, log *slog.Logger) {
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
		sweep(ctx, s.table, func() (int64, bool, error) {
			n, err := s.fn(ctx, now.Add(-s.keep), cfg.Batch)
			return n, n >= int64(cfg.Batch), err
		}, cfg, m, log)
	}
}

// sweep runs batch until it says there is no more to do; batch returns how many rows it
// deleted and whether another batch may find more.
func sweep(ctx context.Context, table string, batch func() (int64, bool, error), cfg SweepConfig, m *Metrics, log *slog.Logger) {
	var total int64
	for ctx.Err() == nil {
		start := time.Now()
		n, more, err := batch()
		took := time.Since(start)
		if err != nil {
			log.Warn("sweep failed", logTable, table, logErr, err)
			return
		}
		total += n
		m.SweepDeleted.WithLabelValues(table).Add(float64(n))
		if !more {
			break
		}
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
}
