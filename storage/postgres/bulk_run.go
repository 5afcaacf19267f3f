package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// RunBulkActions runs bulk actions until ctx ends: it claims each ready action
// (ClaimBulkAction) and works through its keys a batch at a time (RunBulkBatch),
// honouring a cancel between batches. Every replica runs one: an action is held by one
// runner at a time, under a lease that a batch renews, and another replica's runner
// resumes it once the lease has run out. An action started on this replica wakes its
// runner at once; one started on another is found within cfg.Poll.
func (db *DB) RunBulkActions(ctx context.Context, cfg storage.BulkRunConfig) {
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = 10 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 25
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Wake == nil {
		cfg.Wake = func() {}
	}
	log := cfg.Logger
	if log == nil {
		log = db.log
	}
	log = log.With("component", "bulk")
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand)
	runner := hex.EncodeToString(b)
	t := time.NewTicker(cfg.Poll)
	defer t.Stop()
	for {
		id, ok, err := db.ClaimBulkAction(ctx, runner, cfg.Lease)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("claiming a bulk action", "err", err)
		case ok:
			db.runBulk(ctx, id, runner, cfg, log)
			continue // another may be ready
		}
		select {
		case <-ctx.Done():
			return
		case <-db.bulkWake:
		case <-t.C:
		}
	}
}

// runBulk works through one claimed action until it is over, no longer this runner's,
// or ctx ends. A failed batch is kept on the action and tried again after a pause; the
// lease runs out if failures last, and the action waits for the next claim, by this
// replica or another.
func (db *DB) runBulk(ctx context.Context, id int64, runner string, cfg storage.BulkRunConfig, log *slog.Logger) {
	log.Info("bulk action running", "action", id)
	for ctx.Err() == nil {
		b, err := db.RunBulkBatch(ctx, id, runner, db.Now().Add(-cfg.StuckAfter), cfg.Batch, cfg.Lease)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("bulk action batch failed; trying again", "action", id, "err", err)
			if nerr := db.noteBulkError(ctx, id, runner, err); nerr != nil {
				log.Warn("noting a bulk action's failure", "action", id, "err", nerr)
			}
			select {
			case <-ctx.Done():
			case <-time.After(cfg.Lease / 4):
			}
			continue
		}
		if b.Changed > 0 {
			cfg.Wake()
		}
		if b.Over {
			log.Info("bulk action over", "action", id)
			return
		}
	}
}
