package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// SweepExpired deletes at most limit claims that expired at or before now, through the
// index of the claims it may delete (claims_expiring), and returns how many it deleted.
// Keys still owed downstream are kept, however long expired: a key being handed
// downstream (processing), whose work must not be lost, and a key whose hand-off failed
// (failed), which stays on the stuck list, with its payload (sqlOwed), until an operator
// releases or reprocesses it, or a redelivery takes it over. Expiry never waits for the
// sweep (a claim takes over an expired row itself); the sweep only keeps the table small.
func (db *DB) SweepExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	var n int64
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sqlSweepExpired, millis(now), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		// The processed ones leave a trace (forensics.go); a released key was freed on
		// purpose, and its next delivery is no double.
		var gone []expiredClaim
		for rows.Next() {
			var c expiredClaim
			var state string
			if err := rows.Scan(&c.source, &c.key, &state, &c.first, &c.claimedAt, &c.expiresAt); err != nil {
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
		rows.Close()
		return db.traceExpired(ctx, tx, gone)
	})
	if err != nil {
		return 0, fmt.Errorf("sweep expired claims: %w", err)
	}
	return n, nil
}

// sqlSweepExpired deletes up to ?2 claims expired at ?1 and settled or released. Its
// state condition is the one of the index claims_expiring, word for word, so that
// SQLite can use that partial index.
const sqlSweepExpired = `
DELETE FROM claims WHERE id IN (
	SELECT id FROM claims WHERE expires_at <= ?1 AND state IN ('processed', 'released')
	ORDER BY expires_at LIMIT ?2)
RETURNING source, key, state, first_delivery, claimed_at, expires_at`

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
// Reprocessing a key whose payload is gone is refused (release.go). ?1 is now.
const sqlOwed = `EXISTS (SELECT 1 FROM claims c WHERE c.source = deliveries.source AND c.key = deliveries.key
	AND c.first_delivery = deliveries.id
	AND (c.state IN ('processing', 'failed') OR (c.state = 'processed' AND c.attempts > 0 AND c.expires_at > ?1)))`

// SweepDeliveries looks at up to limit deliveries, oldest first from after from, and
// deletes those received before cutoff whose payload is not owed downstream at now
// (see sqlOwed). It returns how many it deleted and the cursor to go on from; Done on
// that cursor means that the walk has looked at every delivery received before cutoff.
//
// The walk goes by id, from a cursor, and steps over the owed deliveries: with many
// keys left unsettled by a downstream outage, a batch that looked for the oldest
// deliveries to delete would read them all again each time. It ends at the newest
// delivery received before cutoff: ids grow with receipt times, so the deliveries
// before it were received before cutoff too (received_at is checked all the same).
func (db *DB) SweepDeliveries(ctx context.Context, now, cutoff time.Time, from storage.SweepCursor, limit int) (int64, storage.SweepCursor, error) {
	if from.Finished {
		return 0, from, nil
	}
	limit = max(limit, 1)
	next := from
	if next.Upto == 0 {
		first, err := db.firstReceivedSince(ctx, cutoff, now)
		if err == nil {
			err = db.read.QueryRowContext(ctx, `SELECT id FROM deliveries WHERE id < ? ORDER BY id DESC LIMIT 1`,
				first).Scan(&next.Upto)
		}
		if errors.Is(err, sql.ErrNoRows) {
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
		if err := db.read.QueryRowContext(ctx, `SELECT min(coalesce((SELECT rolled_up_to FROM delivery_stats_mark), 0),
	coalesce((SELECT id - 1 FROM deliveries WHERE outcome = 'duplicate' AND outcome != 'accepted'
		AND id > (SELECT rolled_up_to FROM ledger_mark) ORDER BY id LIMIT 1), 1 << 62))`).Scan(&rolled); err != nil {
			return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
		}
		if next.Upto = min(next.Upto, rolled); next.Upto <= next.Last {
			return 0, storage.SweepCursor{Finished: true}, nil
		}
	}
	// The batch ends at its limit-th delivery, or at the walk's end.
	end := next.Upto
	err := db.read.QueryRowContext(ctx, `SELECT id FROM deliveries WHERE id > ?1 AND id <= ?2
		ORDER BY id LIMIT 1 OFFSET ?3`, next.Last, next.Upto, limit-1).Scan(&end)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		end, next.Finished = next.Upto, true
	case err != nil:
		return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
	}
	// The walk ends before the first delivery received since cutoff, by id, whatever
	// the search found: a delivery stored after it was received after it too, whatever
	// its stamp says (a clock that was behind, set right since).
	var recent sql.NullInt64
	err = db.read.QueryRowContext(ctx, `SELECT min(id) FROM deliveries WHERE id > ?1 AND id <= ?2 AND received_at >= ?3 AND received_at <= ?4`, next.Last, end, millis(cutoff),
		millis(now.Add(aheadSlack))).Scan(&recent)
	if err != nil {
		return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
	}
	if recent.Valid {
		end, next.Finished = recent.Int64-1, true
	}
	var n int64
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		args := []any{millis(now), next.Last, end, millis(cutoff)}
		if _, err := tx.ExecContext(ctx, sqlHandOverBodies, args...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, sqlSweepDeliveries, args...)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		// The attempts of the deliveries deleted go with them (migration 0027).
		_, err = tx.ExecContext(ctx, `DELETE FROM attempts WHERE delivery > ? AND delivery <= ?
		AND NOT EXISTS (SELECT 1 FROM deliveries AS d WHERE d.id = attempts.delivery)`, next.Last, end)
		return err
	})
	if err != nil {
		return 0, from, fmt.Errorf("sweep old deliveries: %w", err)
	}
	next.Last = end
	return n, next, nil
}

// sqlHandOverBodies gives its own copy of the body to every delivery that refers to the
// body of one the sweep's DELETE (same ?1 to ?4) is about to delete and that is not
// deleted itself: a duplicate stored by reference (body_from) keeps its body for as long
// as it is kept, whatever keeps it (received since cutoff, past this batch of the walk,
// or holding its request's envelope for an item still owed). Both sides are sqlSwept,
// the DELETE's own condition, so the two statements cannot disagree on what stays (the
// writer runs them in one transaction, alone). Those duplicates are found through the
// index of body_from. With a body of its own, the duplicate joins the indexes of keys
// and bookings (migration 0020).
var sqlHandOverBodies = `
UPDATE deliveries SET body = (SELECT f.body FROM deliveries AS f WHERE f.id = deliveries.body_from), body_from = 0
WHERE id IN (
	SELECT d.id FROM deliveries AS f JOIN deliveries AS d ON d.body_from = f.id AND d.body_from != 0
	WHERE f.outcome = 'accepted' AND ` + strings.ReplaceAll(sqlSwept, "deliveries.", "f.") + `
	AND NOT ` + strings.ReplaceAll(sqlSwept, "deliveries.", "d.") + `)`

// sqlSweepDeliveries deletes the deliveries that the sweep's batch deletes (sqlSwept).
var sqlSweepDeliveries = `DELETE FROM deliveries WHERE ` + sqlSwept

// sqlSwept is true for a delivery that the sweep's DELETE deletes: one with an id in
// (?2, ?3] received before ?4 that nothing needs at ?1, neither owed downstream nor
// holding an envelope still read.
var sqlSwept = `(deliveries.id > ?2 AND deliveries.id <= ?3 AND deliveries.received_at < ?4
	AND NOT ` + sqlOwed + ` AND NOT ` + sqlEnvelopeNeeded + `)`

// sqlEnvelopeNeeded is true for the first item of a batched request, which keeps the
// request's envelope for all its items (intake stores it there once), while another
// item that reads it from there outlives the sweep's DELETE (same ?1 to ?4): one still
// owed downstream, or one past this batch of the walk. The first item can come due
// before the others, being a duplicate (a redelivered request's) or settled sooner; it
// is then kept, and a later walk deletes it once they are gone. Copying the envelope to
// each item kept instead would store a large one up to a thousand times.
var sqlEnvelopeNeeded = `(deliveries.batch = deliveries.id AND deliveries.batch_envelope != '' AND EXISTS (
	SELECT 1 FROM deliveries AS s WHERE s.batch = deliveries.id AND s.batch != 0 AND s.id != deliveries.id AND s.batch_envelope = ''
	AND (s.id > ?3 OR s.received_at >= ?4 OR ` + strings.ReplaceAll(sqlOwed, "deliveries.", "s.") + `)))`

// NewestReceivedAt returns the receipt time of the newest delivery stored, by id; zero
// when there is none.
func (db *DB) NewestReceivedAt(ctx context.Context) (time.Time, error) {
	var ms int64
	err := db.read.QueryRowContext(ctx, `SELECT received_at FROM deliveries ORDER BY id DESC LIMIT 1`).Scan(&ms)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("newest delivery: %w", err)
	}
	return fromMillis(ms), nil
}
