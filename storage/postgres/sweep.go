package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// SweepExpired deletes at most limit claims that expired at or before now, through the
// index of the claims it may delete (claims_expiring), and returns how many it deleted.
// Keys still owed downstream are kept, however long expired: a key being handed
// downstream (processing), whose work must not be lost, and a key whose hand-off failed
// (failed), which stays on the stuck list, with its payload (sqlOwed), until an operator
// releases or reprocesses it, or a redelivery takes it over. Expiry never waits for the
// sweep (a claim takes over an expired row itself); the sweep only keeps the table small.
//
// One replica sweeps at a time: while another holds the sweep's lock, SweepExpired
// deletes nothing and returns 0. It never waits for intake either: a claim that a
// transaction holds locked, perhaps taking it over, is left for the next batch.
func (db *DB) SweepExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	var n int64
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if ok, err := db.tryLock(ctx, tx, sweepExpiredLock); err != nil || !ok {
			return err
		}
		rows, err := tx.Query(ctx, sqlSweepExpired, millis(now), max(limit, 1))
		if err != nil {
			return err
		}
		// The processed ones leave a trace; a released key was freed on purpose, and
		// its next delivery is no double.
		var gone []expiredClaim
		for rows.Next() {
			var c expiredClaim
			var state string
			if err := rows.Scan(&c.source, &c.key, &state, &c.first, &c.claimedAt, &c.expiresAt); err != nil {
				rows.Close()
				return err
			}
			n++
			if state == storage.StateProcessed {
				gone = append(gone, c)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return traceExpired(ctx, tx, gone)
	})
	if err != nil {
		return 0, fmt.Errorf("sweep expired claims: %w", err)
	}
	return n, nil
}

// sqlSweepExpired deletes up to $2 claims expired at $1 and settled or released. Its
// state condition is the one of the index claims_expiring, word for word, so that the
// planner uses that partial index. The rows are chosen and locked once, in a CTE (a
// subquery of the DELETE could run again for each row it looks at, each run choosing
// among equal expiry times anew, past the limit), skipping those that intake holds;
// the DELETE checks the conditions again, on the rows as they are once locked.
const sqlSweepExpired = `
WITH chosen AS MATERIALIZED (
	SELECT id FROM claims WHERE expires_at <= $1 AND state IN ('processed', 'released')
	ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)
DELETE FROM claims WHERE id IN (SELECT id FROM chosen)
AND expires_at <= $1 AND state IN ('processed', 'released')
RETURNING source, key, state, first_delivery, claimed_at, expires_at`

// expiredClaim is a claim the sweep deleted.
type expiredClaim struct {
	source, key          string
	first                int64
	claimedAt, expiresAt int64
}

// traceExpired writes the traces of claims the sweep deleted, in its transaction: a
// delivery of one of their keys within the remember period is a late duplicate. A
// trace of the key already there is replaced.
func traceExpired(ctx context.Context, tx pgx.Tx, gone []expiredClaim) error {
	if len(gone) == 0 {
		return nil
	}
	sources := make([]string, len(gone))
	hashes := make([][]byte, len(gone))
	firstSeen, first, expired := make([]int64, len(gone)), make([]int64, len(gone)), make([]int64, len(gone))
	for i, c := range gone {
		sources[i], hashes[i], firstSeen[i], first[i], expired[i] = c.source, storage.KeyHash(c.key), c.claimedAt, c.first, c.expiresAt
	}
	_, err := tx.Exec(ctx, `
INSERT INTO key_traces (source, key_hash, first_seen, first_delivery, expired_at)
SELECT * FROM unnest($1::text[], $2::bytea[], $3::bigint[], $4::bigint[], $5::bigint[])
ON CONFLICT (source, key_hash) DO UPDATE SET
	first_seen = excluded.first_seen, first_delivery = excluded.first_delivery, expired_at = excluded.expired_at`,
		sources, hashes, firstSeen, first, expired)
	if err != nil {
		return fmt.Errorf("trace expired claims: %w", err)
	}
	return nil
}

// sqlOwed is true for a delivery whose payload is still owed downstream, so that
// retention must keep it, however old: the first delivery of a claim that
//
//   - is unsettled (processing or failed): its hand-off is not done yet, or failed and
//     waits for an operator to reprocess it; or
//   - is processed after being handed downstream (attempts > 0) and still held
//     (expires_at > now): release and reprocess would send this payload again.
//
// Nothing else is owed: duplicates and rejections (never sent), the first delivery of a
// key that expired or was released (the key is free, its next delivery brings its own
// payload), and the keys of a record-only source, which are never handed downstream.
// Reprocessing a key whose payload is gone is refused. $1 is now; the delivery is
// "deliveries", which a statement renames (owedOf).
const sqlOwed = `EXISTS (SELECT 1 FROM claims c WHERE c.source = deliveries.source AND c.key = deliveries.key
	AND c.first_delivery = deliveries.id
	AND (c.state IN ('processing', 'failed') OR (c.state = 'processed' AND c.attempts > 0 AND c.expires_at > $1)))`

// owedOf is sqlOwed of the delivery that alias names.
func owedOf(alias string) string { return strings.ReplaceAll(sqlOwed, "deliveries.", alias+".") }

// SweepDeliveries looks at up to limit deliveries, oldest first from after from, and
// deletes those received before cutoff whose payload is not owed downstream at now
// (see sqlOwed). It returns how many it deleted and the cursor to go on from; Done on
// that cursor means that the walk has looked at every delivery received before cutoff.
//
// The walk goes by id, from a cursor, and steps over the owed deliveries: with many
// keys left unsettled by a downstream outage, a batch that looked for the oldest
// deliveries to delete would read them all again each time. It ends at the newest
// delivery received before cutoff: ids grow with receipt times, nearly (each replica
// stamps its own, and takes ids when it commits), so received_at is checked all the
// same, and a delivery the walk passes over goes in a later one.
//
// One replica sweeps at a time: while another holds the sweep's lock, SweepDeliveries
// deletes nothing and returns a cursor that is Done, ending this walk; the replica
// that holds the lock is walking over the same deliveries.
func (db *DB) SweepDeliveries(ctx context.Context, now, cutoff time.Time, from storage.SweepCursor, limit int) (int64, storage.SweepCursor, error) {
	if from.Finished {
		return 0, from, nil
	}
	limit = max(limit, 1)
	next := from
	if next.Upto == 0 {
		first, err := db.firstReceivedSince(ctx, cutoff, now)
		if err == nil {
			err = db.pool.QueryRow(ctx, `SELECT id FROM deliveries WHERE id < $1 ORDER BY id DESC LIMIT 1`,
				first).Scan(&next.Upto)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, storage.SweepCursor{Finished: true}, nil
		}
		if err != nil {
			return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
		}
		// Nor past what the daily roll-ups have counted (the dashboard's every delivery,
		// the ledger's every duplicate): a delivery deleted before they fold it in would
		// be missing from their figures for good. serve rolls up as deliveries come, and
		// after a start with a backlog until it has caught up (a roll-up here would do
		// that work a second time); what it has not counted yet waits for a later walk.
		var rolled int64
		if err := db.pool.QueryRow(ctx, `SELECT least(coalesce((SELECT rolled_up_to FROM delivery_stats_mark WHERE id = 1), 0),
	coalesce((SELECT id - 1 FROM deliveries WHERE `+sqlDuplicates+`
		AND id > coalesce((SELECT rolled_up_to FROM ledger_mark WHERE id = 1), 0) ORDER BY id LIMIT 1), 1 << 62))`).Scan(&rolled); err != nil {
			return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
		}
		if next.Upto = min(next.Upto, rolled); next.Upto <= next.Last {
			return 0, storage.SweepCursor{Finished: true}, nil
		}
	}
	// The batch ends at its limit-th delivery, or at the walk's end.
	end := next.Upto
	err := db.pool.QueryRow(ctx, `SELECT id FROM deliveries WHERE id > $1 AND id <= $2
		ORDER BY id LIMIT 1 OFFSET $3`, next.Last, next.Upto, limit-1).Scan(&end)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		end, next.Finished = next.Upto, true
	case err != nil:
		return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
	}
	// The walk ends before the first delivery received since cutoff, by id, whatever
	// the search found: a delivery stored after it was received after it too, whatever
	// its stamp says (a clock that was behind, set right since).
	var recent *int64
	err = db.pool.QueryRow(ctx, `SELECT min(id) FROM deliveries WHERE id > $1 AND id <= $2 AND received_at >= $3 AND received_at <= $4`, next.Last, end, millis(cutoff),
		millis(now.Add(aheadSlack))).Scan(&recent)
	if err != nil {
		return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
	}
	if recent != nil {
		end, next.Finished = *recent-1, true
	}
	var n int64
	var granted bool
	err = db.writeTx(ctx, func(tx pgx.Tx) error {
		n = 0
		var err error
		if granted, err = db.tryLock(ctx, tx, sweepDeliveriesLock); err != nil || !granted {
			return err
		}
		// The claims that name the deliveries about to go as their first are locked
		// first, in the order intake locks claims: what the statements below read of
		// them holds until this transaction ends. Without it a reprocess could make a
		// payload owed as it is deleted, or intake store a duplicate's body as a
		// reference to it (body_from) after the hand-over below.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM deliveries AS f
JOIN claims AS c ON c.source = f.source AND c.key = f.key AND c.first_delivery = f.id
WHERE f.id > $1 AND f.id <= $2 AND f.received_at < $3 AND f.outcome = 'accepted'
ORDER BY c.source COLLATE "C", c.key COLLATE "C"
FOR SHARE OF c`, next.Last, end, millis(cutoff)); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, sqlSweepDeliveries, millis(now), next.Last, end, millis(cutoff)).Scan(&n); err != nil {
			return err
		}
		// The attempts of the deliveries deleted go with them (migration 0015).
		_, err = tx.Exec(ctx, `DELETE FROM attempts WHERE delivery > $1 AND delivery <= $2
AND NOT EXISTS (SELECT 1 FROM deliveries AS d WHERE d.id = attempts.delivery)`, next.Last, end)
		return err
	})
	if err != nil {
		return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
	}
	if !granted {
		return 0, storage.SweepCursor{Finished: true}, nil
	}
	next.Last = end
	return n, next, nil
}

// sqlSweepDeliveries deletes the deliveries with ids in ($2, $3] received before $4 that
// nothing needs at $1, neither owed downstream nor holding an envelope still read, and
// returns how many it deleted. In the same statement it gives its own copy of the body
// to every delivery that refers to the body of one it deletes and that it does not
// delete itself: a duplicate stored by reference (body_from) keeps its body for as long
// as it is kept, whatever keeps it (received since cutoff, past this batch of the walk,
// or holding its request's envelope for an item still owed). The hand-over reads what
// the DELETE deleted (gone), not a second judgement of what stays, which a change
// committed between two statements could make disagree; the statement's parts share one
// snapshot, so the hand-over still reads the bodies deleted. Those duplicates are found
// through the key index, as every duplicate shares its first delivery's source and key.
var sqlSweepDeliveries = `
WITH gone AS (
	DELETE FROM deliveries
	WHERE id > $2 AND id <= $3 AND received_at < $4 AND NOT ` + sqlOwed + ` AND NOT ` + sqlEnvelopeNeeded + `
	RETURNING id, source, key, outcome),
handed AS (
	UPDATE deliveries AS d SET body = f.body, body_from = 0
	FROM gone AS g JOIN deliveries AS f ON f.id = g.id
	WHERE g.outcome = 'accepted' AND d.source = g.source AND d.key = g.key AND d.body_from = g.id
		AND d.id NOT IN (SELECT id FROM gone))
SELECT count(*) FROM gone`

// sqlEnvelopeNeeded is true for the first item of a batched request, which keeps the
// request's envelope for all its items (intake stores it there once), while another
// item that reads it from there outlives the sweep's DELETE (same $1 to $4): one still
// owed downstream, or one past this batch of the walk. The first item can come due
// before the others, being a duplicate (a redelivered request's) or settled sooner; it
// is then kept, and a later walk deletes it once they are gone. Copying the envelope to
// each item kept instead would store a large one up to a thousand times.
var sqlEnvelopeNeeded = `(deliveries.batch = deliveries.id AND deliveries.batch_envelope <> '' AND EXISTS (
	SELECT 1 FROM deliveries AS s WHERE s.batch = deliveries.id AND s.batch <> 0 AND s.id <> deliveries.id AND s.batch_envelope = ''
	AND (s.id > $3 OR s.received_at >= $4 OR ` + owedOf("s") + `)))`

// NewestReceivedAt returns the receipt time of the newest delivery stored, by id; zero
// when there is none.
func (db *DB) NewestReceivedAt(ctx context.Context) (time.Time, error) {
	var ms int64
	err := db.pool.QueryRow(ctx, `SELECT received_at FROM deliveries ORDER BY id DESC LIMIT 1`).Scan(&ms)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("newest delivery: %w", err)
	}
	return fromMillis(ms), nil
}
