package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The advisory locks of the engine, all of them here so that no two share a number:
// "hook" in the high 32 bits, then the lock's own. Replicas share one database, and
// what must happen once (a migration, a sweep's batch, a roll-up) or in one order (the
// audit chain) takes its lock first. Sweeps and roll-ups take theirs with
// pg_try_advisory_xact_lock and, when another replica holds it, do nothing this round
// (that replica is doing the work): they never run twice at once, and never wait.
const (
	// migrateLock is held, for the session, by the replica that migrates: replicas
	// starting together apply each migration once; the others wait, then find
	// nothing to do.
	migrateLock int64 = 0x686f6f6b_00000000 + iota
	// auditLock is held, for its transaction, by every writer of the audit log.
	auditLock
	sweepExpiredLock
	sweepDeliveriesLock
	sweepTracesLock
	sweepBusinessKeysLock
	sweepCorrelationKeysLock
	rollupStatsLock
	rollupLedgerLock
	sweepAlertsLock
	sweepRejectionsLock
	sweepSessionsLock
	bulkRunnerLock
	// usersLock is held, for its transaction, by every change to an existing user (a
	// role, a password, a removal, a token made, sessions ended): replicas change users
	// one at a time, as SQLite's single writer does, so that two of them cannot each
	// take one of the last two admins away.
	usersLock
	// forensicKeyLock names, by its low half, a space of per-key locks in PostgreSQL's
	// two-int4 key space (apart from the bigint one of the locks above): (that half, a
	// hash of a business or correlation key) is held, for its transaction, by the
	// recording that looks the key up and stores it, so that deliveries of one key
	// recorded at once on two replicas see each other (forensicLookups.queue).
	forensicKeyLock
	// claimKeyLock names, by its low half, the per-key locks of intake in the two-int4
	// key space: every intake transaction takes (that half, 0) shared, then (that
	// half, a hash of the source and key) for each of its keys, in ascending order,
	// before it touches a claim, and holds them until its commit (claimKeyLocks). Two
	// transactions that share a key then wait for each other there, holding no row
	// of the other's, never in a cycle. One with too many keys for a lock each takes
	// (that half, 0) alone, exclusive.
	claimKeyLock
	// rollupSuspectsLock is held by the replica that folds suspects into their running
	// totals (RollupSuspects).
	rollupSuspectsLock
)

// tryLock takes the advisory lock for the rest of tx, unless another transaction holds
// it, and reports whether it did.
func tryLock(ctx context.Context, tx pgx.Tx, lock int64) (bool, error) {
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, lock).Scan(&ok); err != nil {
		return false, fmt.Errorf("take lock: %w", err)
	}
	return ok, nil
}
