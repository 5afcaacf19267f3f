package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/hookdedup/hookdedup/storage/outage"
)

// BulkRunConfig tunes RunBulkActions. The zero value of each field has a default.
type BulkRunConfig struct {
	// StuckAfter: a key processing for longer is stuck (and may be released). Default 10m.
	StuckAfter time.Duration
	// Batch is how many keys share a transaction. Default 25: a key of an action costs
	// more than one of a bulk release (its claim is read twice, its outcome written), and
	// with 1 M claims stored 25 keys held the write connection 10 ms on average (20,000
	// keys in 7.9 s), 50 keys 24 ms, on a shared 2-core machine.
	Batch int
	// Lease is how long an action stays this runner's without a batch: once it ends,
	// another runner (after a restart, the new process) resumes the action. Default 30s.
	Lease time.Duration
	// Poll is how often the runner looks for ready actions when nothing woke it
	// (actions started by another process). Default 2s.
	Poll time.Duration
	// Wake, if set, is called after a batch queued keys to be dispatched again.
	Wake   func()
	Logger *slog.Logger
}

// BulkRunEngine is what the runner of bulk actions needs of an engine: its clock, the
// claim of a ready action and a batch of its keys (as Store has them), and a place to
// keep why a batch failed, for the action's page.
type BulkRunEngine interface {
	Clock() time.Time
	ClaimBulkAction(ctx context.Context, runner string, lease time.Duration) (id int64, ok bool, err error)
	RunBulkBatch(ctx context.Context, id int64, runner string, stuckBefore time.Time, n int, lease time.Duration) (BulkBatch, error)
	// NoteBulkError keeps failure on action id, while runner holds it.
	NoteBulkError(ctx context.Context, id int64, runner string, failure error) error
	// ClearOldPreviews deletes the previews never started that are more than
	// MaxPreviewAge old, with their keys.
	ClearOldPreviews(ctx context.Context) error
}

// clearPreviewsEvery is how often the runner deletes the previews never started that
// are more than MaxPreviewAge old: of no use by then (neither startable nor
// approvable), they would otherwise stay listed until someone made another preview.
const clearPreviewsEvery = time.Minute

// RunBulkActions is every engine's RunBulkActions: until ctx ends it claims each ready
// action (ClaimBulkAction) and works through its keys a batch at a time
// (RunBulkBatch), honouring a cancel between batches. Any number of runners may run on
// one database, in one process or several (replicas): an action is held by one runner
// at a time, under a lease that each batch renews, and another runner resumes it once
// the lease has run out. wake receives when an action became ready in this process;
// one made ready elsewhere is found within cfg.Poll. log receives what goes wrong.
func RunBulkActions(ctx context.Context, e BulkRunEngine, cfg BulkRunConfig, wake <-chan struct{}, log *slog.Logger) {
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
	if cfg.Logger != nil {
		log = cfg.Logger
	}
	log = log.With("component", "bulk")
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand)
	runner := hex.EncodeToString(b)
	t := time.NewTicker(cfg.Poll)
	defer t.Stop()
	// While the database cannot store or be reached, each of these fails alike at every
	// round (a claim every Poll, a batch every Lease/4) for as long as that lasts.
	fails := bulkFailures{
		previews: outage.New(log, slog.LevelWarn, "deleting previews of more than a day ago", "previews of more than a day ago deleted again"),
		claims:   outage.New(log, slog.LevelWarn, "claiming a bulk action", "bulk actions claimed again"),
		batches:  outage.New(log, slog.LevelWarn, "bulk action batch failed; trying again", "bulk action batches run again"),
	}
	var cleared time.Time
	for {
		if now := time.Now(); now.Sub(cleared) >= clearPreviewsEvery {
			cleared = now
			if err := e.ClearOldPreviews(ctx); ctx.Err() == nil {
				fails.previews.Note(time.Now(), err)
			}
		}
		id, ok, err := e.ClaimBulkAction(ctx, runner, cfg.Lease)
		if ctx.Err() == nil {
			fails.claims.Note(time.Now(), err)
		}
		if err == nil && ok {
			runBulk(ctx, e, id, runner, cfg, log, fails.batches)
			continue // another may be ready
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// bulkFailures are RunBulkActions' logs of its failing rounds.
type bulkFailures struct{ previews, claims, batches *outage.Log }

// runBulk works through one claimed action until it is over, no longer this runner's,
// or ctx ends. A failed batch is kept on the action and tried again after a pause; the
// lease runs out if failures last, and the action waits for the next claim, by this
// runner or another. fails logs the failed batches, of this action and the next.
func runBulk(ctx context.Context, e BulkRunEngine, id int64, runner string, cfg BulkRunConfig, log *slog.Logger, fails *outage.Log) {
	log.Info("bulk action running", "action", id)
	for ctx.Err() == nil {
		b, err := e.RunBulkBatch(ctx, id, runner, e.Clock().Add(-cfg.StuckAfter), cfg.Batch, cfg.Lease)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if nerr := e.NoteBulkError(ctx, id, runner, err); nerr != nil {
				err = fmt.Errorf("%w (and noting it on the action: %v)", err, nerr)
			}
			fails.Note(time.Now(), err, "action", id)
			select {
			case <-ctx.Done():
			case <-time.After(cfg.Lease / 4):
			}
			continue
		}
		fails.Note(time.Now(), nil)
		if b.Changed > 0 {
			cfg.Wake()
		}
		if b.Over {
			log.Info("bulk action over", "action", id)
			return
		}
	}
}
