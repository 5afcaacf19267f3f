package postgres

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
)

// The advisory locks of the engine, all of them here so that no two share a number:
// "hook" in the high 32 bits, then the lock's own. Replicas share one database, and
// what must happen once (a migration, a sweep's batch, a roll-up) or in one order (the
// audit chain) takes its lock first. Sweeps and roll-ups take theirs with
// pg_try_advisory_xact_lock and, when another replica holds it, do nothing this round
// (that replica is doing the work): they never run twice at once, and never wait.
//
// Advisory locks are the database's, not a schema's: every lock but migrateLock is
// taken in the installation's own lockSpace, so that two installations in two schemas
// of one database neither wait on each other's locks nor skip their sweeps and
// roll-ups while the other's run.
const (
	// migrateLock is held, for the session, by the replica that migrates: replicas
	// starting together apply each migration once; the others wait, then find
	// nothing to do. It is the database's, as it was before the locks had a space
	// of their own: a replica of this version and an older one starting together
	// still migrate one at a time (0024_lock_space.sql).
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
	// role, a password, a removal, a token made, sessions ended) and by the addition
	// of one: replicas change users one at a time, as SQLite's single writer does, so
	// that two of them cannot each take one of the last two admins away, nor each add
	// one of two names that differ only in letter case.
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
	// intakeLock is held, shared, by every intake transaction, and exclusively by one
	// with too many keys for a lock each (claimKeyLock).
	intakeLock
)

// lockSpace is an installation's own part of the database's advisory locks, told by
// its schema's name (lockSpaceOf).
type lockSpace uint32

// lockSpaceOf is the lock space of the installation in the schema named schema: a hash
// of the name, which no other schema of the database has at the same time (save a
// collision of the hashes, which costs the two installations only waits on each
// other's locks). Not the schema's oid: a schema made again under its name (restored
// from pg_dump, or on a new server by pg_upgrade or logical replication) has another,
// and a replica that ran on across it, reconnecting, would keep the old one while those
// started since took the new: apart in their locks, they would write the audit chain at
// once, and sweep and roll up twice.
func lockSpaceOf(schema string) lockSpace {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return lockSpace(max(h.Sum32(), 1)) // 0 would be the database's own space, migrateLock's
}

// id is the lock of s named lock (one of the constants above): "hook" mixed with the
// space in the high 32 bits, which tells the spaces apart, and the lock's own
// in the low 32.
func (s lockSpace) id(lock int64) int64 {
	return int64(uint64(uint32(s)^0x686f6f6b)<<32 | uint64(uint32(lock)))
}

// key is the second half of the per-key lock whose hash is h (forensicKeyLockID) in
// s: the same key of two installations takes two locks (save a collision of the
// hashes, which costs a moment's wait, as one within an installation does).
func (s lockSpace) key(h int32) int32 { return h ^ int32(s) }

// tryLock takes the advisory lock for the rest of tx, unless another transaction holds
// it, and reports whether it did.
func (db *DB) tryLock(ctx context.Context, tx pgx.Tx, lock int64) (bool, error) {
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, db.locks.id(lock)).Scan(&ok); err != nil {
		return false, fmt.Errorf("take lock: %w", err)
	}
	return ok, nil
}
