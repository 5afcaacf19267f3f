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
	ContentType string
	Body        []byte
	Attempts    int       // attempts made before this one
	Generation  time.Time // the claim's claimed_at: a re-claimed key is another job
}

// LeaseDue returns up to limit jobs due at now, oldest first, and leases them until
// now+lease: another dispatcher, in this process or another, skips them until then. A
// dispatcher that dies mid-attempt loses nothing: its jobs fall due again when the
// lease ends.
func (db *DB) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Job, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `
UPDATE claims SET next_attempt_at = ?1
WHERE id IN (SELECT id FROM claims WHERE state = 'processing' AND next_attempt_at <= ?2
	ORDER BY next_attempt_at, id LIMIT ?3)
RETURNING id, source, key, first_delivery, attempts, claimed_at`, millis(now.Add(lease)), millis(now), limit)
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	var jobs []Job
	for rows.Next() {
		var j Job
		var gen int64
		if err := rows.Scan(&j.ClaimID, &j.Source, &j.Key, &j.Delivery, &j.Attempts, &gen); err != nil {
			rows.Close()
			return nil, fmt.Errorf("lease jobs: %w", err)
		}
		j.Generation = fromMillis(gen)
		jobs = append(jobs, j)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	for i := range jobs {
		err := tx.QueryRowContext(ctx, `SELECT content_type, body FROM deliveries WHERE id = ?`, jobs[i].Delivery).
			Scan(&jobs[i].ContentType, &jobs[i].Body)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("lease jobs: payload of delivery %d: %w", jobs[i].Delivery, err)
		}
	}
	if err := tx.Commit(); err != nil {
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
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("finish attempt %s/%s: %w", job.Source, job.Key, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, job.Source, job.Key, job.Delivery, millis(a.StartedAt),
		a.Duration.Milliseconds(), a.Status, a.Error, a.Response); err != nil {
		return false, fmt.Errorf("finish attempt %s/%s: %w", job.Source, job.Key, err)
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
		return false, fmt.Errorf("finish attempt %s/%s: %w", job.Source, job.Key, err)
	}
	n, _ := r.RowsAffected()
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("finish attempt %s/%s: %w", job.Source, job.Key, err)
	}
	return n == 1, nil
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

// KeyFilter selects keys for ListKeys.
type KeyFilter struct {
	Source string // "" = every source
	State  string // "" = every state
	// Stuck selects only stuck keys: failed, or processing since before StuckBefore.
	Stuck       bool
	StuckBefore time.Time
	Before      int64 // keyset cursor: keys with a smaller id than this (0 = from the newest)
	Limit       int   // default 100
}

// query is the query of a keys listing for f. With from > 0 (a listing that walks,
// see walks), it looks only at the claims from that id up to the cursor.
func (f KeyFilter) query(from int64) (string, []any) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	// Without statistics SQLite served a source filter from the claims' UNIQUE(source,
	// key) index, reading every claim of the source to sort them (0.8-1.1 s with 5 M
	// keys), and a state filter by walking the whole table when few keys matched. So
	// the unary + keeps it off those indexes: most listings walk the newest claims
	// first, and the keys that can be stuck (processing, failed) or were released come
	// from partial indexes of their own.
	unsettled := !f.Stuck && (f.State == StateProcessing || f.State == StateFailed)
	table, where := "claims", "1 = 1"
	var args []any
	if f.Source != "" {
		where += " AND +source = ?"
		args = append(args, f.Source)
	}
	switch {
	case unsettled:
		where += " AND state = ?" // claims_unsettled_id's first column
		args = append(args, f.State)
	case f.State != "":
		where += " AND +state = ?"
		args = append(args, f.State)
	}
	switch {
	case f.Stuck:
		table = "claims INDEXED BY claims_unsettled"
		where += " AND " + sqlStuck
		args = append(args, millis(f.StuckBefore))
	case unsettled:
		table = "claims INDEXED BY claims_unsettled_id"
		where += " AND state IN ('processing', 'failed')"
	case f.State == StateReleased:
		table = "claims INDEXED BY claims_released"
		where += " AND state = 'released'"
	}
	order := "id DESC"
	switch {
	case f.Stuck:
		order = "updated_at, id"
		if f.Before > 0 {
			where += " AND id != ?" // stuck listings are short; the cursor only skips
			args = append(args, f.Before)
		}
	case from > 0:
		where += " AND id >= ? AND id < ?"
		args = append(args, from, f.below())
	case f.Before > 0:
		where += " AND id < ?"
		args = append(args, f.Before)
	}
	args = append(args, f.Limit)
	return `SELECT ` + claimColumns + ` FROM ` + table + ` WHERE ` + where + ` ORDER BY ` + order + ` LIMIT ?`, args
}

// walks reports whether f's listing walks the claims newest first and checks each one
// (a source, the processed state) rather than reading an index of its own: a source
// with few keys, or none yet, among millions would be a walk through every claim.
func (f KeyFilter) walks() bool {
	if f.Stuck || f.State == StateProcessing || f.State == StateFailed || f.State == StateReleased {
		return false
	}
	return f.Source != "" || f.State != ""
}

// below is the id that f's listing starts below.
func (f KeyFilter) below() int64 {
	if f.Before > 0 {
		return f.Before
	}
	return 1<<63 - 1
}

// sqlKeyWindow is the id of the oldest of the ScanWindow newest claims below a cursor,
// or 0 when fewer remain. Stepping a cursor over the rowids finds it in ~1 ms with 5 M
// claims; gathering the window's ids into a list (id IN (...)) took 8-12 ms.
const sqlKeyWindow = `SELECT coalesce((SELECT id FROM claims WHERE id < ? ORDER BY id DESC LIMIT 1 OFFSET ?), 0)`

// KeyPage is one page of a keys listing.
type KeyPage struct {
	Keys []Claim
	// Next is the cursor of the following page (KeyFilter.Before), 0 when there is
	// none. Stuck listings have no next page.
	Next int64
	// Partial is true when the page was cut short to stay fast: the filter needs a look
	// at each claim, and only ScanWindow claims were looked at. Next goes on from there.
	Partial bool
}

// Keys returns one page of the keys matching f, in ListKeys' order, for the console and
// the API. It stays fast at millions of keys: a listing that has to check each claim (a
// source's keys, the processed ones) looks at most at ScanWindow of them, newest first,
// and says so in Partial. ListKeys, for bulk releases and the command line, is exhaustive.
func (db *DB) Keys(ctx context.Context, f KeyFilter) (KeyPage, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	limit := f.Limit
	f.Limit++ // one more than a page says whether another follows
	var from int64
	if f.walks() {
		if err := db.read.QueryRowContext(ctx, sqlKeyWindow, f.below(), ScanWindow-1).Scan(&from); err != nil {
			return KeyPage{}, fmt.Errorf("list keys: %w", err)
		}
	}
	query, args := f.query(from)
	claims, err := db.listKeys(ctx, query, args)
	if err != nil {
		return KeyPage{}, err
	}
	var page KeyPage
	if len(claims) > limit {
		page.Keys = claims[:limit]
		if !f.Stuck {
			page.Next = page.Keys[limit-1].ID
		}
		return page, nil
	}
	page.Keys = claims
	if from > 0 {
		// Fewer than a page in a full window: older claims may match.
		page.Next, page.Partial = from, true
	}
	return page, nil
}

// ListKeys returns every claim matching f, up to f.Limit. Stuck keys come oldest first
// (the longest stuck on top); other listings newest first.
func (db *DB) ListKeys(ctx context.Context, f KeyFilter) ([]Claim, error) {
	query, args := f.query(0)
	return db.listKeys(ctx, query, args)
}

func (db *DB) listKeys(ctx context.Context, query string, args []any) ([]Claim, error) {
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []Claim
	for rows.Next() {
		c, err := scanClaim(rows)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// sqlStuckCounts reads only claims_stuck, which holds the keys that can be stuck with
// all the count needs, in source order (migration 0005). Left to itself SQLite (which has
// no statistics) walked the claims' UNIQUE(source, key) index instead, for the GROUP BY:
// every claim, 1.8 s with 5 M keys stored, every 15 s for the stuck-keys gauge and on
// each dashboard view; and while that read held its snapshot the WAL could not start
// over, so intake stalled behind the backstop checkpoint for up to half a second.
const sqlStuckCounts = `SELECT source, count(*) FROM claims INDEXED BY claims_stuck
	WHERE ` + sqlStuck + ` GROUP BY source`

// sqlStuck selects the stuck claims, given the time before which a processing key is
// stuck: Claim.Stuck in SQL, worded so that claims_unsettled and claims_stuck serve it.
const sqlStuck = `state IN ('processing', 'failed') AND (state = 'failed' OR updated_at < ?)`

// StuckCounts counts the stuck keys of each source that has any.
func (db *DB) StuckCounts(ctx context.Context, stuckBefore time.Time) (map[string]int, error) {
	rows, err := db.read.QueryContext(ctx, sqlStuckCounts, millis(stuckBefore))
	if err != nil {
		return nil, fmt.Errorf("count stuck keys: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count stuck keys: %w", err)
		}
		out[s] = n
	}
	return out, rows.Err()
}
