package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// LeaseDue returns up to limit jobs of sources (nil: of every source) due at now, oldest
// first, and leases them until now+lease: another dispatcher, in this process or another,
// skips them until then. A dispatcher that dies mid-attempt loses nothing: its jobs fall
// due again when the lease ends.
func (db *DB) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	if sources != nil && len(sources) == 0 {
		return nil, nil
	}
	only, err := sourceList(sources)
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	var jobs []storage.Job
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		jobs = nil
		rows, err := tx.QueryContext(ctx, `
UPDATE claims SET next_attempt_at = max(?1, coalesce(leased_until, 0) + 1), leased_until = max(?1, coalesce(leased_until, 0) + 1)
WHERE id IN (SELECT id FROM claims WHERE state = 'processing' AND next_attempt_at <= ?2
	AND (?4 IS NULL OR source IN (SELECT value FROM json_each(?4)))
	ORDER BY next_attempt_at, id LIMIT ?3)
RETURNING id, source, key, first_delivery, attempts, claimed_at, updated_at, leased_until`, millis(now.Add(lease)), millis(now), limit, only)
		if err != nil {
			return err
		}
		for rows.Next() {
			var j storage.Job
			var gen, updated, leased int64
			if err := rows.Scan(&j.ClaimID, &j.Source, &j.Key, &j.Delivery, &j.Attempts, &gen, &updated, &leased); err != nil {
				rows.Close()
				return err
			}
			j.Generation, j.Updated, j.Lease = fromMillis(gen), fromMillis(updated), fromMillis(leased)
			jobs = append(jobs, j)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i := range jobs {
			j := &jobs[i]
			err := tx.QueryRowContext(ctx, `SELECT source, key, content_type, body, batch, batch_index, `+sqlEnvelope+`
FROM deliveries WHERE id = ?`, j.Delivery).Scan(&j.DeliverySource, &j.DeliveryKey, &j.ContentType, &j.Body,
				&j.Batch, &j.BatchIndex, &j.BatchEnvelope)
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
	slices.SortFunc(jobs, func(a, b storage.Job) int { return cmp.Compare(a.ClaimID, b.ClaimID) })
	return jobs, nil
}

// NextDue returns when the earliest processing key of sources (nil: of every source) falls
// due, or the zero time if none.
func (db *DB) NextDue(ctx context.Context, sources []string) (time.Time, error) {
	if sources != nil && len(sources) == 0 {
		return time.Time{}, nil
	}
	only, err := sourceList(sources)
	if err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	}
	var next sql.NullInt64
	err = db.read.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM claims WHERE state = 'processing'
	AND (?1 IS NULL OR source IN (SELECT value FROM json_each(?1)))`, only).Scan(&next)
	if err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return fromMillis(next.Int64), nil
}

// sourceList is sources as the JSON array the queue's statements read with json_each, or
// nil (SQL NULL) for every source.
func sourceList(sources []string) (any, error) {
	if sources == nil {
		return nil, nil
	}
	b, err := json.Marshal(sources)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// FinishAttempt records an attempt of job and moves its key on as res says, in one
// transaction. A key that was released, reprocessed, claimed anew or leased again
// meanwhile is left as it is (its attempt is still recorded): it is the job's only while
// its claimed_at, updated_at and lease are the ones leased. Reports whether the key
// moved.
func (db *DB) FinishAttempt(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (bool, error) {
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
			last_error = '', updated_at = ? WHERE id = ? AND state = 'processing' AND claimed_at = ? AND updated_at = ? AND leased_until = ?`
			args = []any{now, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease)}
		case res.Failed:
			q = `UPDATE claims SET state = 'failed', attempts = attempts + 1, next_attempt_at = NULL,
			last_error = ?, updated_at = ? WHERE id = ? AND state = 'processing' AND claimed_at = ? AND updated_at = ? AND leased_until = ?`
			args = []any{res.LastError, now, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease)}
		default:
			q = `UPDATE claims SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?
			WHERE id = ? AND state = 'processing' AND claimed_at = ? AND updated_at = ? AND leased_until = ?`
			args = []any{millis(res.NextAt), res.LastError, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease)}
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
func (db *DB) Attempts(ctx context.Context, source, key string) ([]storage.Attempt, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, source, key, delivery, started_at, duration_ms, status, error, response
		FROM attempts WHERE source = ? AND key = ? ORDER BY id`, source, key)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s/%s: %w", source, key, err)
	}
	defer rows.Close()
	var out []storage.Attempt
	for rows.Next() {
		var a storage.Attempt
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
func (db *DB) LastAttempt(ctx context.Context, source, key string) (storage.Attempt, error) {
	var a storage.Attempt
	var started, ms int64
	err := db.read.QueryRowContext(ctx, `SELECT id, source, key, delivery, started_at, duration_ms, status, error, response
		FROM attempts WHERE source = ? AND key = ? ORDER BY id DESC LIMIT 1`, source, key).
		Scan(&a.ID, &a.Source, &a.Key, &a.Delivery, &started, &ms, &a.Status, &a.Error, &a.Response)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Attempt{}, fmt.Errorf("last attempt of %s/%s: %w", source, key, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Attempt{}, fmt.Errorf("last attempt of %s/%s: %w", source, key, err)
	}
	a.StartedAt, a.Duration = fromMillis(started), time.Duration(ms)*time.Millisecond
	return a, nil
}
