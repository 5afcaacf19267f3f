package storage

import (
	"log/slog"
	"time"
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
