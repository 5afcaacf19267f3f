package storage

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Job is an accepted event due downstream, leased to one dispatcher.
type Job struct {
	ClaimID     int64
	Source, Key string
	Delivery    int64 // the delivery whose payload is sent
	// Stored is false when the delivery is no longer stored: there is no payload to
	// send, and ContentType and Body are empty.
	Stored bool
	// DeliverySource and DeliveryKey are the stored delivery's own source and key. They
	// are the job's own unless the claim names a delivery of another key, which the
	// dispatcher must never send under this one's Idempotency-Key.
	DeliverySource, DeliveryKey string
	ContentType                 string
	Body                        []byte
	// Batch is the stored delivery's batch (the id of the first item delivery of the
	// request it came in), 0 when that request carried one event; BatchIndex is its
	// place in that request.
	Batch      int64
	BatchIndex int
	Attempts   int       // attempts made before this one
	Generation time.Time // the claim's claimed_at: a re-claimed key is another job
}

// LeaseDue returns up to limit jobs due at now, oldest first, and leases them until
// now+lease: another dispatcher, in this process or another, skips them until then. A
// dispatcher that dies mid-attempt loses nothing: its jobs fall due again when the
// lease ends.
func (db *DB) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Job, error) {
	var jobs []Job
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		jobs = nil
		rows, err := tx.QueryContext(ctx, `
UPDATE claims SET next_attempt_at = ?1
WHERE id IN (SELECT id FROM claims WHERE state = 'processing' AND next_attempt_at <= ?2
	ORDER BY next_attempt_at, id LIMIT ?3)
RETURNING id, source, key, first_delivery, attempts, claimed_at`, millis(now.Add(lease)), millis(now), limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			var j Job
			var gen int64
			if err := rows.Scan(&j.ClaimID, &j.Source, &j.Key, &j.Delivery, &j.Attempts, &gen); err != nil {
				rows.Close()
				return err
			}
			j.Generation = fromMillis(gen)
			jobs = append(jobs, j)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range jobs {
			j := &jobs[i]
			err := tx.QueryRowContext(ctx, `SELECT source, key, content_type, body, batch, batch_index FROM deliveries WHERE id = ?`,
				j.Delivery).Scan(&j.DeliverySource, &j.DeliveryKey, &j.ContentType, &j.Body, &j.Batch, &j.BatchIndex)
			switch {
			case err == nil:
				j.Stored = true
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("payload of delivery %d: %w", j.Delivery, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	// RETURNING gives rows in no promised order; hand them out oldest first.
	slices.SortFunc(jobs, func(a, b Job) int { return cmp.Compare(a.ClaimID, b.ClaimID) })
	return jobs, nil
}

// NextDue returns when the earliest processing key falls due, or the zero time if none.
func (db *DB) NextDue(ctx context.Context) (time.Time, error) {
	var next sql.NullInt64
	err := db.read.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM claims WHERE state = 'processing'`).Scan(&next)
	if err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return fromMillis(next.Int64), nil
}

// Attempt is one hand-off attempt downstream.
type Attempt struct {
	ID          int64
	Source, Key string
	Delivery    int64
	StartedAt   time.Time
	Duration    time.Duration
	Status      int    // HTTP status; 0 when none came back
	Error       string // what went wrong; "" on success
	Response    string // a bounded excerpt of the answer
}

// AttemptResult says what follows an attempt.
type AttemptResult struct {
	Done      bool      // the downstream took it: processed
	Failed    bool      // the last allowed attempt failed: failed
	NextAt    time.Time // otherwise: when to try again
	LastError string
}

// FinishAttempt records an attempt of job and moves its key on as res says, in one
// transaction. A key that was released, reprocessed or claimed anew meanwhile is left
// as it is (its attempt is still recorded). Reports whether the key moved.
func (db *DB) FinishAttempt(ctx context.Context, job Job, a Attempt, res AttemptResult) (bool, error) {
	var moved bool
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, job.Source, job.Key, job.Delivery, millis(a.StartedAt),
			a.Duration.Milliseconds(), a.Status, a.Error, a.Response); err != nil {
			return err
		}
		now := millis(db.Now())
		var q string
		var args []any
		switch {
		case res.Done:
			q = `UPDATE claims SET state = 'processed', attempts = attempts + 1, next_attempt_at = NULL,
			last_error = '', updated_at = ? WHERE id = ? AND state = 'processing' AND claimed_at = ?`
			args = []any{now, job.ClaimID, millis(job.Generation)}
		case res.Failed:
			q = `UPDATE claims SET state = 'failed', attempts = attempts + 1, next_attempt_at = NULL,
			last_error = ?, updated_at = ? WHERE id = ? AND state = 'processing' AND claimed_at = ?`
			args = []any{res.LastError, now, job.ClaimID, millis(job.Generation)}
		default:
			q = `UPDATE claims SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?
			WHERE id = ? AND state = 'processing' AND claimed_at = ?`
			args = []any{millis(res.NextAt), res.LastError, job.ClaimID, millis(job.Generation)}
		}
		r, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		moved = n == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("finish attempt %s/%s: %w", job.Source, job.Key, err)
	}
	return moved, nil
}

// Attempts returns the attempts made for one source's key, oldest first.
func (db *DB) Attempts(ctx context.Context, source, key string) ([]Attempt, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, source, key, delivery, started_at, duration_ms, status, error, response
		FROM attempts WHERE source = ? AND key = ? ORDER BY id`, source, key)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s/%s: %w", source, key, err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var started, ms int64
		if err := rows.Scan(&a.ID, &a.Source, &a.Key, &a.Delivery, &started, &ms, &a.Status, &a.Error, &a.Response); err != nil {
			return nil, fmt.Errorf("attempts of %s/%s: %w", source, key, err)
		}
		a.StartedAt, a.Duration = fromMillis(started), time.Duration(ms)*time.Millisecond
		out = append(out, a)
	}
	return out, rows.Err()
}

// LastAttempt returns the latest dispatch attempt of one source's key. Returns
// ErrNotFound if none was made.
func (db *DB) LastAttempt(ctx context.Context, source, key string) (Attempt, error) {
	var a Attempt
	var started, ms int64
	err := db.read.QueryRowContext(ctx, `SELECT id, source, key, delivery, started_at, duration_ms, status, error, response
		FROM attempts WHERE source = ? AND key = ? ORDER BY id DESC LIMIT 1`, source, key).
		Scan(&a.ID, &a.Source, &a.Key, &a.Delivery, &started, &ms, &a.Status, &a.Error, &a.Response)
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, fmt.Errorf("last attempt of %s/%s: %w", source, key, ErrNotFound)
	}
	if err != nil {
		return Attempt{}, fmt.Errorf("last attempt of %s/%s: %w", source, key, err)
	}
	a.StartedAt, a.Duration = fromMillis(started), time.Duration(ms)*time.Millisecond
	return a, nil
}
