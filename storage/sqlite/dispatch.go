package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	sources = storage.DistinctSources(sources)
	args := []any{millis(now.Add(lease)), millis(now), limit}
	for _, s := range sources {
		args = append(args, s)
	}
	var jobs []storage.Job
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		jobs = nil
		// A due key whose next_attempt_at is still its lease's end was never settled:
		// its last attempt's outcome is unknown (storage.Claim.Interrupted). The same
		// keys are selected again below: this transaction holds the writer.
		if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
SELECT source, key, first_delivery, leased_until, 0, 0, ?1, '' FROM claims
WHERE id IN (`+sqlDue(len(sources), first)+`) AND next_attempt_at = leased_until ORDER BY id`,
			append([]any{storage.AttemptInterrupted}, args[1:]...)...); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `
UPDATE claims SET next_attempt_at = max(?1, coalesce(leased_until, 0) + 1), leased_until = max(?1, coalesce(leased_until, 0) + 1)
WHERE id IN (`+sqlDue(len(sources), first)+`)
RETURNING id, source, key, first_delivery, attempts, claimed_at, updated_at, leased_until`, args...)
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

// sqlDue selects the ids of up to ?3 keys due at ?2, oldest first: of every source when
// sources is 0, else of the sources ?4 … ?(3+sources). Each source's keys are read on
// their own from claims_due (source, next_attempt_at), oldest first and at most ?3 (1
// when first is set), so that neither another source's due keys nor a long queue of
// one's own are walked: a source removed from every configuration with a backlog left
// behind costs nothing.
func sqlDue(sources int, first bool) string {
	if sources == 0 {
		return `SELECT id FROM claims WHERE state = 'processing' AND next_attempt_at <= ?2 ORDER BY next_attempt_at, id LIMIT ?3`
	}
	each := "?3"
	if first {
		each = "1"
	}
	arms := make([]string, sources)
	for i := range arms {
		arms[i] = fmt.Sprintf(`SELECT * FROM (SELECT id, next_attempt_at FROM claims INDEXED BY claims_due
	WHERE state = 'processing' AND source = ?%d AND next_attempt_at <= ?2 ORDER BY next_attempt_at, id LIMIT %s)`, 4+i, each)
	}
	return `SELECT id FROM (` + unionAll(arms, func(u string) string { return `SELECT * FROM (` + u + `)` }) +
		`) ORDER BY next_attempt_at, id LIMIT ?3`
}

// maxCompound is how many selects one UNION ALL joins at most: SQLite refuses more
// than 500 (SQLITE_MAX_COMPOUND_SELECT).
const maxCompound = 400

// unionAll joins arms with UNION ALL, nesting them maxCompound at a time, each group
// made a select of its own by group, so that no compound joins more than maxCompound.
func unionAll(arms []string, group func(union string) string) string {
	for len(arms) > maxCompound {
		var groups []string
		for chunk := range slices.Chunk(arms, maxCompound) {
			groups = append(groups, group(strings.Join(chunk, ` UNION ALL `)))
		}
		arms = groups
	}
	return strings.Join(arms, ` UNION ALL `)
}

// NextDue returns when the earliest processing key of sources (nil: of every source) falls
// due, or the zero time if none.
func (db *DB) NextDue(ctx context.Context, sources []string) (time.Time, error) {
	if sources != nil && len(sources) == 0 {
		return time.Time{}, nil
	}
	q := `SELECT min(next_attempt_at) FROM claims WHERE state = 'processing'`
	args := make([]any, len(sources))
	if sources != nil {
		// One look-up of the index per source: min() over an IN list would read
		// every queued key of each.
		arms := make([]string, len(sources))
		for i, s := range sources {
			arms[i] = `SELECT (SELECT min(next_attempt_at) FROM claims INDEXED BY claims_due WHERE state = 'processing' AND source = ?) AS due`
			args[i] = s
		}
		q = `SELECT min(due) FROM (` + unionAll(arms, func(u string) string { return `SELECT min(due) AS due FROM (` + u + `)` }) + `)`
	}
	var next sql.NullInt64
	if err := db.read.QueryRowContext(ctx, q, args...).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return fromMillis(next.Int64), nil
}

// DispatcherSeen records that the dispatcher id runs at now and hands the sources
// forwarding downstream, and forgets the dispatchers not seen for storage.DispatcherForgetAfter.
func (db *DB) DispatcherSeen(ctx context.Context, id string, forwarding []string, now time.Time) error {
	if forwarding == nil {
		forwarding = []string{} // [], not null: json_each reads null as one value
	}
	list, err := json.Marshal(forwarding)
	if err != nil {
		return fmt.Errorf("dispatcher seen: %w", err)
	}
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO dispatchers (id, forwarding, seen_at) VALUES (?1, ?2, ?3)
ON CONFLICT (id) DO UPDATE SET forwarding = excluded.forwarding, seen_at = excluded.seen_at`, id, string(list), millis(now)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM dispatchers WHERE seen_at < ?`, millis(now.Add(-storage.DispatcherForgetAfter)))
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
	rows, err := db.read.QueryContext(ctx, `SELECT DISTINCT f.value FROM dispatchers AS d, json_each(d.forwarding) AS f
WHERE d.seen_at >= ? ORDER BY f.value`, millis(since))
	if err != nil {
		return nil, fmt.Errorf("forwarded sources: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("forwarded sources: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("forwarded sources: %w", err)
	}
	return out, nil
}

// YieldLease gives job's lease back unused, nothing handed off: the key falls due
// at once, and the next lease lists no interrupted attempt for it (next_attempt_at is
// no longer the lease's end). A key leased again, settled, released, reprocessed or
// claimed anew meanwhile is left as it is. Reports whether the lease was given back.
func (db *DB) YieldLease(ctx context.Context, job storage.Job) (bool, error) {
	r, err := db.writeExec(ctx, `UPDATE claims SET next_attempt_at = ?
	WHERE id = ? AND state = 'processing' AND claimed_at = ? AND updated_at = ? AND leased_until = ? AND attempts = ? AND next_attempt_at = leased_until`,
		millis(storage.NotALease(db.Now(), job.Lease)), job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease), job.Attempts)
	if err != nil {
		return false, fmt.Errorf("yield lease of %s/%s: %w", job.Source, job.Key, err)
	}
	n, _ := r.RowsAffected()
	return n == 1, nil
}

// FinishAttempt records an attempt of job and moves its key on as res says, in one
// transaction. A key that was released, reprocessed, claimed anew or leased again
// meanwhile is left as it is (its attempt is still recorded): it is the job's only while
// its claimed_at, updated_at and lease are the ones leased. Reports whether the key
// moved.
func (db *DB) FinishAttempt(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (bool, error) {
	var moved bool
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		now := millis(db.Now())
		var q string
		var args []any
		switch {
		case res.Done:
			q = `UPDATE claims SET state = 'processed', attempts = attempts + ?, next_attempt_at = NULL,
			last_error = '', updated_at = ? WHERE id = ? AND state = 'processing' AND claimed_at = ? AND updated_at = ? AND leased_until = ? AND attempts = ?`
			args = []any{storage.AttemptsCounted(res), now, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease), job.Attempts}
		case res.Failed:
			q = `UPDATE claims SET state = 'failed', attempts = attempts + 1, next_attempt_at = NULL,
			last_error = ?, updated_at = ? WHERE id = ? AND state = 'processing' AND claimed_at = ? AND updated_at = ? AND leased_until = ? AND attempts = ?`
			args = []any{res.LastError, now, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease), job.Attempts}
		default:
			q = `UPDATE claims SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?
			WHERE id = ? AND state = 'processing' AND claimed_at = ? AND updated_at = ? AND leased_until = ? AND attempts = ?`
			args = []any{millis(storage.NotALease(res.NextAt, job.Lease)), res.LastError, job.ClaimID, millis(job.Generation), millis(job.Updated), millis(job.Lease), job.Attempts}
		}
		r, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		moved = n == 1
		if res.Listed {
			return nil // the attempt is in the key's history already: only the key moves
		}
		// Recorded already: its record committed, and the answer was lost (the
		// dispatcher records an outcome again until it hears it was). Whether the key
		// moved says nothing of that: a record against a lease that ran out moves no key,
		// and when its answer is lost the dispatcher records the outcome again against
		// the newer lease, which moves it.
		var again bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM attempts WHERE source = ? AND key = ?
		AND delivery = ? AND started_at = ? AND status = ? AND error = ?)`, job.Source, job.Key, job.Delivery,
			millis(a.StartedAt), a.Status, a.Error).Scan(&again); err != nil || again {
			return err
		}
		if !moved {
			// Its lease ran out, and a lease, release or reprocess since may have
			// recorded it as interrupted: its outcome, known now, takes that one's place,
			// in the same row, so that the key's history keeps its hand-offs in order.
			r, err := tx.ExecContext(ctx, `UPDATE attempts SET delivery = ?, started_at = ?, duration_ms = ?, status = ?,
			error = ?, response = ? WHERE id = (SELECT min(id) FROM attempts WHERE source = ? AND key = ? AND started_at = ? AND error = ?)`,
				job.Delivery, millis(a.StartedAt), a.Duration.Milliseconds(), a.Status, a.Error, a.Response,
				job.Source, job.Key, millis(job.Lease), storage.AttemptInterrupted)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n == 1 {
				return nil
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, job.Source, job.Key, job.Delivery, millis(a.StartedAt),
			a.Duration.Milliseconds(), a.Status, a.Error, a.Response)
		return err
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
