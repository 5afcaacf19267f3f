package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// leaseSQL leases the keys that due selects (up to $3, due at $2) until $1 and returns
// each with its payload, oldest first. The due keys are locked FOR UPDATE SKIP LOCKED
// before their lease is set, so that dispatchers on several replicas leasing at once
// never take the same key: each skips the keys another is leasing right now, and a key
// whose lease was committed meanwhile is seen with its new next_attempt_at (PostgreSQL
// re-checks a locked row's newest version) and left out. MATERIALIZED keeps the locking
// select a step of its own, run once, whatever plan the update gets.
//
// A due key whose next_attempt_at is still its lease's end was never settled: its last
// attempt's outcome is unknown (storage.Claim.Interrupted), and interrupted records it
// as such ($4). due gives the columns it reads: the locked rows' newest versions, which
// a plain read of claims in the same statement would not see.
func leaseSQL(due string) string {
	return `
WITH due AS MATERIALIZED (` + due + `
), interrupted AS (
	INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
	SELECT source, key, first_delivery, leased_until, 0, 0, $4, '' FROM due
	WHERE next_attempt_at = leased_until ORDER BY id
), leased AS (
	UPDATE claims AS c SET next_attempt_at = greatest($1, coalesce(c.leased_until, 0) + 1),
		leased_until = greatest($1, coalesce(c.leased_until, 0) + 1)
	FROM due WHERE c.id = due.id
	RETURNING c.id, c.source, c.key, c.first_delivery, c.attempts, c.claimed_at, c.updated_at, c.leased_until
)
SELECT l.id, l.source, l.key, l.first_delivery, l.attempts, l.claimed_at, l.updated_at, l.leased_until,
	d.id IS NOT NULL, d.source, d.key, d.content_type,
	CASE WHEN d.body_from = 0 THEN d.body ELSE (SELECT b.body FROM deliveries AS b WHERE b.id = d.body_from) END,
	d.batch, d.batch_index, ` + envelopeOf("d") + `
FROM leased AS l LEFT JOIN deliveries AS d ON d.id = l.first_delivery
ORDER BY l.id`
}

var (
	// sqlLeaseDue leases the due keys of every source.
	sqlLeaseDue = leaseSQL(`
	SELECT ` + dueColumns + ` FROM claims WHERE state = 'processing' AND next_attempt_at <= $2
	ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED`)
	// sqlLeaseDueOf leases the due keys of the sources $5. Each source's keys are read
	// on their own from claims_due (source, next_attempt_at, id), oldest first and at
	// most $3, so that neither another source's due keys nor a long queue of one's own
	// are walked: a source removed from every configuration with a backlog left behind
	// costs nothing.
	sqlLeaseDueOf = leaseSQL(dueOf("$3"))
	// sqlLeaseFirstDueOf is sqlLeaseDueOf taking the oldest due key of each source alone.
	sqlLeaseFirstDueOf = leaseSQL(dueOf("1"))
)

// dueOf selects the due keys of the sources $5, oldest first, at most each of every
// source and $3 in all.
func dueOf(each string) string {
	return `
	SELECT c.* FROM unnest($5::text[]) AS s (source) CROSS JOIN LATERAL (
		SELECT ` + dueColumns + ` FROM claims
		WHERE state = 'processing' AND source = s.source AND next_attempt_at <= $2
		ORDER BY next_attempt_at, id LIMIT ` + each + ` FOR UPDATE SKIP LOCKED
	) AS c
	ORDER BY c.next_attempt_at, c.id LIMIT $3`
}

// dueColumns are the columns of a due key that leaseSQL reads.
const dueColumns = `id, source, key, first_delivery, next_attempt_at, leased_until`

// LeaseDue returns up to limit jobs of sources (nil: of every source) due at now, oldest
// first, and leases them until now+lease: another dispatcher, on this replica or another,
// skips them until then. A dispatcher that dies mid-attempt loses nothing: its jobs fall
// due again when the lease ends, and any replica's dispatcher takes them.
func (db *DB) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	if sources != nil && len(sources) == 0 {
		return nil, nil
	}
	return db.leaseDue(ctx, now, lease, limit, sources, false)
}

// LeaseFirstDue is LeaseDue of sources (none when empty), taking at most one job of
// each: its oldest due.
func (db *DB) LeaseFirstDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	if len(sources) == 0 {
		return nil, nil
	}
	return db.leaseDue(ctx, now, lease, limit, sources, true)
}

// leaseDue is LeaseDue, taking at most one job of each source when first is set.
func (db *DB) leaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string, first bool) ([]storage.Job, error) {
	var upTo *int // NULL: no limit, as a negative one is on SQLite; PostgreSQL refuses it
	if limit >= 0 {
		upTo = &limit
	}
	var jobs []storage.Job
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		jobs = nil
		q, args := sqlLeaseDue, []any{millis(now.Add(lease)), millis(now), upTo, storage.AttemptInterrupted}
		if sources != nil {
			q, args = sqlLeaseDueOf, append(args, storage.DistinctSources(sources))
			if first {
				q = sqlLeaseFirstDueOf
			}
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var j storage.Job
			var gen, updated, leased int64
			var attempts int32
			var source, key, contentType *string
			var batch *int64
			var index *int32
			var envelope *string
			if err := rows.Scan(&j.ClaimID, &j.Source, &j.Key, &j.Delivery, &attempts, &gen, &updated, &leased,
				&j.Stored, &source, &key, &contentType, &j.Body, &batch, &index, &envelope); err != nil {
				return err
			}
			j.Attempts, j.Generation, j.Updated, j.Lease = int(attempts), fromMillis(gen), fromMillis(updated), fromMillis(leased)
			if j.Stored {
				j.DeliverySource, j.DeliveryKey, j.ContentType = *source, *key, *contentType
				j.Batch, j.BatchIndex, j.BatchEnvelope = *batch, int(*index), *envelope
			}
			jobs = append(jobs, j)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	return jobs, nil
}

// NextDue returns when the earliest processing key of sources (nil: of every source) falls
// due, or the zero time if none.
func (db *DB) NextDue(ctx context.Context, sources []string) (time.Time, error) {
	if sources != nil && len(sources) == 0 {
		return time.Time{}, nil
	}
	q, args := `SELECT min(next_attempt_at) FROM claims WHERE state = 'processing'`, []any{}
	if sources != nil {
		// One look-up of the index per source: min() over source = ANY would read every
		// queued key of each.
		q, args = `SELECT min(m.due) FROM unnest($1::text[]) AS s (source) CROSS JOIN LATERAL (
	SELECT min(next_attempt_at) AS due FROM claims WHERE state = 'processing' AND source = s.source) AS m`, []any{sources}
	}
	var next *int64
	err := db.pool.QueryRow(ctx, q, args...).Scan(&next)
	if err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	}
	if next == nil {
		return time.Time{}, nil
	}
	return fromMillis(*next), nil
}

// DispatcherSeen records that the dispatcher id runs at now and hands the sources
// forwarding downstream, and forgets the dispatchers not seen for storage.DispatcherForgetAfter.
func (db *DB) DispatcherSeen(ctx context.Context, id string, forwarding []string, now time.Time) error {
	if forwarding == nil {
		forwarding = []string{}
	}
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO dispatchers (id, forwarding, seen_at) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET forwarding = excluded.forwarding, seen_at = excluded.seen_at`, id, forwarding, millis(now)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM dispatchers WHERE seen_at < $1`, millis(now.Add(-storage.DispatcherForgetAfter)))
		return err
	})
	if err != nil {
		return fmt.Errorf("dispatcher seen: %w", err)
	}
	return nil
}

// ForwardedSources returns the sources that a dispatcher seen at since or later hands
// downstream.
func (db *DB) ForwardedSources(ctx context.Context, since time.Time) ([]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT f FROM dispatchers, unnest(forwarding) AS f
WHERE seen_at >= $1 ORDER BY f`, millis(since))
	if err != nil {
		return nil, fmt.Errorf("forwarded sources: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("forwarded sources: %w", err)
	}
	return out, nil
}

// YieldLease gives job's lease back unused, nothing handed off: the key falls due
// at once, and the next lease lists no interrupted attempt for it (next_attempt_at is
// no longer the lease's end). A key leased again, settled, released, reprocessed or
// claimed anew meanwhile is left as it is. Reports whether the lease was given back.
func (db *DB) YieldLease(ctx context.Context, job storage.Job) (bool, error) {
	var n int64
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE claims SET next_attempt_at = $1
		WHERE id = $2 AND state = 'processing' AND claimed_at = $3 AND updated_at = $4 AND leased_until = $5 AND attempts = $6 AND next_attempt_at = leased_until`,
			millis(storage.NotALease(db.Now(), job.Lease)), job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease), job.Attempts)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("yield lease of %s/%s: %w", job.Source, job.Key, err)
	}
	return n == 1, nil
}

// FinishAttempt records an attempt of job and moves its key on as res says, in one
// transaction. A key that was released, reprocessed, claimed anew or leased again
// meanwhile is left as it is (its attempt is still recorded). Reports whether the key
// moved.
func (db *DB) FinishAttempt(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (bool, error) {
	var moved bool
	// The answer's excerpt is the downstream's text, and the errors may quote it: a NUL
	// in either, which PostgreSQL's text cannot hold, must not keep the attempt from
	// being recorded (the key would be leased and sent again and again).
	a.Error, a.Response, res.LastError = storage.ReplacedText(a.Error), storage.ReplacedText(a.Response), storage.ReplacedText(res.LastError)
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		now := millis(db.Now())
		var q string
		var args []any
		// The key's row is updated only if it is still the job's: processing, of the claim
		// the job was leased from (claimed_at is its generation), not reprocessed since (a
		// reprocess sets updated_at), not leased again (leased_until) and not recorded
		// already (attempts: a retry moves no other of these). A release, a
		// reprocess, a takeover or another lease committed meanwhile makes PostgreSQL's
		// re-check of the row fail, and the key is left as it is.
		switch {
		case res.Done:
			q = `UPDATE claims SET state = 'processed', attempts = attempts + $7, next_attempt_at = NULL,
			last_error = '', updated_at = $1 WHERE id = $2 AND state = 'processing' AND claimed_at = $3 AND updated_at = $4 AND leased_until = $5 AND attempts = $6`
			args = []any{now, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease), job.Attempts, storage.AttemptsCounted(res)}
		case res.Failed:
			q = `UPDATE claims SET state = 'failed', attempts = attempts + 1, next_attempt_at = NULL,
			last_error = $1, updated_at = $2 WHERE id = $3 AND state = 'processing' AND claimed_at = $4 AND updated_at = $5 AND leased_until = $6 AND attempts = $7`
			args = []any{res.LastError, now, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease), job.Attempts}
		default:
			q = `UPDATE claims SET attempts = attempts + 1, next_attempt_at = $1, last_error = $2
			WHERE id = $3 AND state = 'processing' AND claimed_at = $4 AND updated_at = $5 AND leased_until = $6 AND attempts = $7`
			args = []any{millis(storage.NotALease(res.NextAt, job.Lease)), res.LastError, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease), job.Attempts}
		}
		tag, err := tx.Exec(ctx, q, args...)
		if err != nil {
			return err
		}
		moved = tag.RowsAffected() == 1
		if res.Listed {
			return nil // the attempt is in the key's history already: only the key moves
		}
		// Recorded already: its record committed, and the answer was lost (the
		// dispatcher records an outcome again until it hears it was). Whether the key
		// moved says nothing of that: a record against a lease that ran out moves no key,
		// and when its answer is lost the dispatcher records the outcome again against
		// the newer lease, which moves it.
		var again bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM attempts WHERE source = $1 AND key = $2
		AND delivery = $3 AND started_at = $4 AND status = $5 AND error = $6)`, job.Source, job.Key, job.Delivery,
			millis(a.StartedAt), a.Status, a.Error).Scan(&again); err != nil || again {
			return err
		}
		if !moved {
			// Its lease ran out, and a lease, release or reprocess since may have
			// recorded it as interrupted: its outcome, known now, takes that one's place,
			// in the same row, so that the key's history keeps its hand-offs in order.
			tag, err := tx.Exec(ctx, `UPDATE attempts SET delivery = $1, started_at = $2, duration_ms = $3, status = $4,
			error = $5, response = $6 WHERE id = (SELECT min(id) FROM attempts WHERE source = $7 AND key = $8 AND started_at = $9 AND error = $10)`,
				job.Delivery, millis(a.StartedAt), a.Duration.Milliseconds(), a.Status, a.Error, a.Response,
				job.Source, job.Key, millis(job.Lease), storage.AttemptInterrupted)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				return nil
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, job.Source, job.Key, job.Delivery, millis(a.StartedAt),
			a.Duration.Milliseconds(), a.Status, a.Error, a.Response)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("finish attempt %s/%s: %w", job.Source, job.Key, err)
	}
	return moved, nil
}

// attemptColumns are an attempt's columns, in the order scanAttempt reads them.
const attemptColumns = `id, source, key, delivery, started_at, duration_ms, status, error, response`

func scanAttempt(s scanner) (storage.Attempt, error) {
	var a storage.Attempt
	var started, ms int64
	var status int32
	if err := s.Scan(&a.ID, &a.Source, &a.Key, &a.Delivery, &started, &ms, &status, &a.Error, &a.Response); err != nil {
		return storage.Attempt{}, err
	}
	a.Status = int(status)
	a.StartedAt, a.Duration = fromMillis(started), time.Duration(ms)*time.Millisecond
	return a, nil
}

// Attempts returns the attempts made for one source's key, oldest first.
func (db *DB) Attempts(ctx context.Context, source, key string) ([]storage.Attempt, error) {
	if !textOK(source, key) {
		return nil, nil // no such key was ever stored, nor its attempts
	}
	rows, err := db.pool.Query(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE source = $1 AND key = $2 ORDER BY id`, source, key)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s/%s: %w", source, key, err)
	}
	defer rows.Close()
	var out []storage.Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fmt.Errorf("attempts of %s/%s: %w", source, key, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attempts of %s/%s: %w", source, key, err)
	}
	return out, nil
}

// LastAttempt returns the latest dispatch attempt of one source's key. Returns
// ErrNotFound if none was made.
func (db *DB) LastAttempt(ctx context.Context, source, key string) (storage.Attempt, error) {
	if !textOK(source, key) {
		return storage.Attempt{}, fmt.Errorf("last attempt of %s/%s: %w", source, key, storage.ErrNotFound)
	}
	a, err := scanAttempt(db.pool.QueryRow(ctx, `SELECT `+attemptColumns+` FROM attempts
		WHERE source = $1 AND key = $2 ORDER BY id DESC LIMIT 1`, source, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Attempt{}, fmt.Errorf("last attempt of %s/%s: %w", source, key, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Attempt{}, fmt.Errorf("last attempt of %s/%s: %w", source, key, err)
	}
	return a, nil
}
