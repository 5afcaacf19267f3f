package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// EventFilter selects deliveries for the console's events list. Empty fields match
// everything.
type EventFilter struct {
	Source   string
	Outcome  Outcome
	Mismatch bool // only duplicates whose payload differs from the first delivery's
	Property string
	Booking  string
	Status   string // the event's own status (Delivery.EventStatus), e.g. "cancelled"
	Key      string
	// KeySources are the sources searched for Key when Source is empty (keys are scoped
	// by source, and the index that finds a key starts with its source).
	KeySources []string
	From, To   time.Time // received at or after From, before To (zero = unbounded)

	// Before is the keyset cursor: deliveries with a smaller id (0 = from the newest).
	Before int64
	// Limit is the page size; default 50.
	Limit int
}

// EventPage is one page of the events list, newest first.
type EventPage struct {
	Events []Delivery // without Headers and Body
	// Next is the cursor of the following page (EventFilter.Before), 0 when there is none.
	Next int64
	// Partial is true when the page was cut short to stay fast: the filters need a
	// look at each row, and only ScanWindow rows were looked at. Next goes on from there.
	Partial bool
}

// ScanWindow bounds how many rows one page of the events list examines when a filter
// cannot be answered by an index alone: a page never costs more than this many row
// reads, at any table size.
const ScanWindow = 20000

const eventColumns = `id, source, received_at, outcome, status, error, key, key_method, key_from,
	key_canonical, payload_hash, mismatch, first_delivery, property, booking, event_status, amount,
	remote_addr, content_type`

func scanEvent(s scanner) (Delivery, error) {
	var d Delivery
	var received int64
	var outcome string
	err := s.Scan(&d.ID, &d.Source, &received, &outcome, &d.Status, &d.Error, &d.Key, &d.KeyMethod,
		&d.KeyFrom, &d.KeyCanonical, &d.PayloadHash, &d.Mismatch, &d.FirstDelivery, &d.Property,
		&d.Booking, &d.EventStatus, &d.Amount, &d.RemoteAddr, &d.ContentType)
	d.ReceivedAt, d.Outcome = fromMillis(received), Outcome(outcome)
	return d, err
}

// eventQuery is an events filter as SQL: the one condition an index answers ("drive"),
// the conditions checked on each row found ("check", written so that SQLite does not
// pick another index for them), and the id range every part shares.
type eventQuery struct {
	drive, check []string
	driveArgs    []any
	checkArgs    []any
}

// plan chooses, for f, the most selective filter that has an index, in this order:
// key, booking, mismatch, source, outcome (duplicate or rejected). The unary + on the
// others keeps SQLite from choosing an index by guesswork (there are no statistics).
// Property, status and accepted have no index: a few values share most rows, so a
// stretch of rows in id order finds a page of them.
func (f EventFilter) plan() eventQuery {
	var q eventQuery
	driven := false
	// add adds one filter: as the driving condition when it has an index and none was
	// chosen yet, otherwise as a check written so that SQLite cannot use an index for it.
	add := func(indexed bool, drive, check string, args ...any) {
		if indexed && !driven {
			driven = true
			q.drive = append(q.drive, drive)
			q.driveArgs = append(q.driveArgs, args...)
			return
		}
		q.check = append(q.check, check)
		q.checkArgs = append(q.checkArgs, args...)
	}
	if f.Key != "" {
		sources := f.KeySources
		if f.Source != "" {
			sources = []string{f.Source}
		}
		if len(sources) > 0 {
			args := make([]any, 0, len(sources)+1)
			for _, s := range sources {
				args = append(args, s)
			}
			add(true, "source IN ("+placeholders(len(sources))+") AND key = ?", "", append(args, f.Key)...)
		} else {
			add(false, "", "+key = ?", f.Key)
		}
	}
	// A partial index is used only when the query implies its WHERE: hence the != ''.
	if f.Booking != "" {
		add(true, "booking = ? AND booking != ''", "+booking = ?", f.Booking)
	}
	if f.Mismatch {
		add(true, "mismatch", "+mismatch != 0")
	}
	if f.Source != "" && f.Key == "" { // with a key, the source is part of the key's condition
		add(true, "source = ?", "+source = ?", f.Source)
	}
	if f.Outcome != "" {
		add(f.Outcome != Accepted, "outcome = ? AND outcome != 'accepted'", "+outcome = ?", string(f.Outcome))
	}
	if f.Property != "" {
		add(false, "", "+property = ?", f.Property)
	}
	if f.Status != "" {
		add(false, "", "+event_status = ?", f.Status)
	}
	return q
}

// windowStart is the query of where a page's search stops: the oldest of the ScanWindow
// newest ids that the driving index finds in [lo, hi], or 0 when it finds fewer. One
// cursor stepped over the index finds it; gathering those ids into a list for the page
// query to check (id IN (...)) cost 8-10 ms more a page with 5 M deliveries.
func (q eventQuery) windowStart(lo, hi int64) (string, []any) {
	drive := append([]string{"id BETWEEN ? AND ?"}, q.drive...)
	return `SELECT coalesce((SELECT id FROM deliveries WHERE ` + strings.Join(drive, " AND ") +
			` ORDER BY id DESC LIMIT 1 OFFSET ?), 0)`,
		append(append([]any{lo, hi}, q.driveArgs...), ScanWindow-1)
}

// pageQuery is the query of one page of up to limit deliveries in [lo, hi] that the
// driving index finds and the checks pass, newest first.
func (q eventQuery) pageQuery(lo, hi int64, limit int) (string, []any) {
	where := append(append([]string{"id BETWEEN ? AND ?"}, q.drive...), q.check...)
	args := append(append(append([]any{lo, hi}, q.driveArgs...), q.checkArgs...), limit)
	return `SELECT ` + eventColumns + ` FROM deliveries WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY id DESC LIMIT ?`, args
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// idBounds turns f's time range and cursor into an id range: receipt times grow with
// ids, so one index look-up at each end replaces a time condition on every row.
// Deliveries committed within the same instant may straddle a bound by a millisecond.
func (db *DB) idBounds(ctx context.Context, f EventFilter) (lo, hi int64, err error) {
	lo, hi = 1, 1<<63-1
	if f.Before > 0 {
		hi = f.Before - 1
	}
	if !f.From.IsZero() {
		err = db.read.QueryRowContext(ctx, `SELECT coalesce((SELECT id FROM deliveries WHERE received_at >= ?
			ORDER BY received_at LIMIT 1), 1<<62)`, millis(f.From)).Scan(&lo)
		if err != nil {
			return 0, 0, err
		}
	}
	if !f.To.IsZero() {
		var first int64
		err = db.read.QueryRowContext(ctx, `SELECT coalesce((SELECT id FROM deliveries WHERE received_at >= ?
			ORDER BY received_at LIMIT 1), 1<<62)`, millis(f.To)).Scan(&first)
		if err != nil {
			return 0, 0, err
		}
		hi = min(hi, first-1)
	}
	return lo, hi, nil
}

// Events returns one page of the deliveries that match f, newest first. It stays fast
// at millions of deliveries: each page is found through one index, and a page whose
// filters need a look at each row examines at most ScanWindow rows (Partial then says
// so, and Next goes on from where it stopped).
func (db *DB) Events(ctx context.Context, f EventFilter) (EventPage, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	lo, hi, err := db.idBounds(ctx, f)
	if err != nil {
		return EventPage{}, fmt.Errorf("events: %w", err)
	}
	var page EventPage
	if lo > hi {
		return page, nil
	}
	q := f.plan()
	// With checks on each row, the page searches a window of the driving index at most.
	var start int64
	if len(q.check) > 0 {
		query, args := q.windowStart(lo, hi)
		if err := db.read.QueryRowContext(ctx, query, args...).Scan(&start); err != nil {
			return EventPage{}, fmt.Errorf("events: %w", err)
		}
	}
	query, args := q.pageQuery(max(lo, start), hi, f.Limit+1)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return EventPage{}, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanEvent(rows)
		if err != nil {
			return EventPage{}, fmt.Errorf("events: %w", err)
		}
		page.Events = append(page.Events, d)
	}
	if err := rows.Err(); err != nil {
		return EventPage{}, fmt.Errorf("events: %w", err)
	}
	if len(page.Events) > f.Limit {
		page.Events = page.Events[:f.Limit]
		page.Next = page.Events[f.Limit-1].ID
		return page, nil
	}
	if start > lo {
		// Fewer than a page in a full window, and older deliveries left to search.
		page.Next, page.Partial = start, true
	}
	return page, nil
}

// EachEvent calls fn for every delivery that matches f (ignoring f.Limit), newest
// first, a page at a time, and stops at fn's first error, which it returns.
func (db *DB) EachEvent(ctx context.Context, f EventFilter, fn func(Delivery) error) error {
	f.Limit = 500
	for {
		page, err := db.Events(ctx, f)
		if err != nil {
			return err
		}
		for _, d := range page.Events {
			if err := fn(d); err != nil {
				return err
			}
		}
		if page.Next == 0 {
			return nil
		}
		f.Before = page.Next
	}
}

// ExplainEvents returns SQLite's query plans for a page of f, one line per step: the
// query that finds where its window starts (when f checks each row), then the page
// query. For tests that check no filter scans the table.
func (db *DB) ExplainEvents(ctx context.Context, f EventFilter) (string, error) {
	q := f.plan()
	var plan string
	if len(q.check) > 0 {
		query, args := q.windowStart(1, 1<<62)
		p, err := db.explain(ctx, query, args...)
		if err != nil {
			return "", err
		}
		plan = p
	}
	query, args := q.pageQuery(1, 1<<62, 51)
	p, err := db.explain(ctx, query, args...)
	return plan + p, err
}

// ExplainKeyDeliveries returns the query plan of FirstKeyDeliveries.
func (db *DB) ExplainKeyDeliveries(ctx context.Context) (string, error) {
	return db.explain(ctx, sqlKeyDeliveries, "s", "k", 101)
}

// ExplainKeys returns the query plan of ListKeys for f or, with window, of Keys: for a
// listing that walks, the query that finds where its window starts, then the page.
func (db *DB) ExplainKeys(ctx context.Context, f KeyFilter, window bool) (string, error) {
	var from int64
	var plan string
	if window && f.walks() {
		from = 1
		p, err := db.explain(ctx, sqlKeyWindow, f.below(), ScanWindow-1)
		if err != nil {
			return "", err
		}
		plan = p
	}
	query, args := f.query(from)
	p, err := db.explain(ctx, query, args...)
	return plan + p, err
}

// ExplainStuckCounts returns the query plan of StuckCounts.
func (db *DB) ExplainStuckCounts(ctx context.Context) (string, error) {
	return db.explain(ctx, sqlStuckCounts, 0)
}

func (db *DB) explain(ctx context.Context, query string, args ...any) (string, error) {
	rows, err := db.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		b.WriteString(detail)
		b.WriteByte('\n')
	}
	return b.String(), rows.Err()
}

// StatBucket is the deliveries of one source and outcome in one period.
type StatBucket struct {
	Source     string
	Start      time.Time // the period's start
	Outcome    Outcome
	Deliveries int64
	Mismatches int64
	WithAmount int64   // deliveries that carried an amount
	Amount     float64 // their amounts summed
}

// RollupStats folds up to limit deliveries not yet counted into the hourly totals that
// DeliveryStats reads, and reports how many it folded (fewer than limit: it has caught
// up). Intake stays free of the work: the counting reads the deliveries on a read
// connection (on the one write connection it held up intake for as long as it took to
// read thousands of rows, bodies and all), and only its result, a few rows, is written.
// Concurrent calls are safe: the mark moves only from where the counting started, so a
// stretch of deliveries is counted once.
func (db *DB) RollupStats(ctx context.Context, limit int) (int, error) {
	type stat struct {
		source, outcome              string
		hour, deliveries, mismatches int64
		withAmount                   int64
		amount                       float64
	}
	var (
		mark, upto, n int64
		stats         []stat
	)
	err := func() error {
		if err := db.read.QueryRowContext(ctx, `SELECT rolled_up_to FROM delivery_stats_mark`).Scan(&mark); err != nil {
			return err
		}
		// One statement, so one snapshot: the stretch after the mark and its counts. (A
		// call that moves the mark meanwhile makes this one's write a no-op.)
		rows, err := db.read.QueryContext(ctx, `
WITH stretch AS (SELECT id FROM deliveries WHERE id > ?1 ORDER BY id LIMIT ?2),
     bounds AS (SELECT coalesce(max(id), 0) AS upto, count(*) AS n FROM stretch)
SELECT bounds.upto, bounds.n, d.source, d.received_at / 3600000, d.outcome, count(d.id),
	coalesce(sum(d.mismatch != 0), 0), coalesce(sum(d.amount != ''), 0),
	total(CASE WHEN d.amount != '' THEN CAST(d.amount AS REAL) END)
FROM bounds LEFT JOIN deliveries d ON d.id > ?1 AND d.id <= bounds.upto
GROUP BY 3, 4, 5`, mark, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st stat
			var source, outcome sql.NullString
			var hour sql.NullInt64
			if err := rows.Scan(&upto, &n, &source, &hour, &outcome, &st.deliveries, &st.mismatches,
				&st.withAmount, &st.amount); err != nil {
				return err
			}
			if st.deliveries > 0 {
				st.source, st.hour, st.outcome = source.String, hour.Int64, outcome.String
				stats = append(stats, st)
			}
		}
		return rows.Err()
	}()
	if err != nil {
		return 0, fmt.Errorf("roll up stats: %w", err)
	}
	if n == 0 {
		return 0, nil
	}

	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("roll up stats: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE delivery_stats_mark SET rolled_up_to = ? WHERE rolled_up_to = ?`, upto, mark)
	if err != nil {
		return 0, fmt.Errorf("roll up stats: %w", err)
	}
	if moved, err := res.RowsAffected(); err != nil || moved == 0 {
		return 0, err // another call counted this stretch first
	}
	for _, st := range stats {
		if _, err := tx.ExecContext(ctx, `
INSERT INTO delivery_stats (source, hour, outcome, deliveries, mismatches, with_amount, amount)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, hour, outcome) DO UPDATE SET
	deliveries  = deliveries + excluded.deliveries,
	mismatches  = mismatches + excluded.mismatches,
	with_amount = with_amount + excluded.with_amount,
	amount      = amount + excluded.amount`,
			st.source, st.hour, st.outcome, st.deliveries, st.mismatches, st.withAmount, st.amount); err != nil {
			return 0, fmt.Errorf("roll up stats: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("roll up stats: %w", err)
	}
	return int(n), nil
}

// DeliveryStats returns the deliveries received in [from, to) per source, outcome and
// period of step (a whole number of hours), oldest first. Periods start at from. It
// reads the hourly totals that RollupStats keeps, so its cost does not grow with the
// deliveries; deliveries not rolled up yet are not in it.
func (db *DB) DeliveryStats(ctx context.Context, from, to time.Time, step time.Duration) ([]StatBucket, error) {
	hours := int64(step / time.Hour)
	if hours < 1 {
		hours = 1
	}
	first := from.UnixMilli() / 3600000
	rows, err := db.read.QueryContext(ctx, `
SELECT source, (hour - ?1) / ?2, outcome, sum(deliveries), sum(mismatches), sum(with_amount), total(amount)
FROM delivery_stats WHERE hour >= ?1 AND hour < ?3
GROUP BY 1, 2, 3 ORDER BY 2, 1, 3`, first, hours, (to.UnixMilli()+3599999)/3600000)
	if err != nil {
		return nil, fmt.Errorf("delivery stats: %w", err)
	}
	defer rows.Close()
	var out []StatBucket
	for rows.Next() {
		var b StatBucket
		var n int64
		var outcome string
		if err := rows.Scan(&b.Source, &n, &outcome, &b.Deliveries, &b.Mismatches, &b.WithAmount, &b.Amount); err != nil {
			return nil, fmt.Errorf("delivery stats: %w", err)
		}
		b.Outcome = Outcome(outcome)
		b.Start = time.UnixMilli((first + n*hours) * 3600000).UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

// RecentDuplicates returns up to limit duplicates that carried an amount, received at or
// after since, newest first: the refunds and cancellations caught.
func (db *DB) RecentDuplicates(ctx context.Context, since time.Time, limit int) ([]Delivery, error) {
	lo, _, err := db.idBounds(ctx, EventFilter{From: since})
	if err != nil {
		return nil, fmt.Errorf("recent duplicates: %w", err)
	}
	rows, err := db.read.QueryContext(ctx, `SELECT `+eventColumns+` FROM deliveries
		WHERE id IN (SELECT id FROM deliveries WHERE outcome = 'duplicate' AND outcome != 'accepted' AND id >= ?
			ORDER BY id DESC LIMIT ?)
		AND amount != '' ORDER BY id DESC LIMIT ?`, lo, ScanWindow, limit)
	if err != nil {
		return nil, fmt.Errorf("recent duplicates: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("recent duplicates: %w", err)
		}
		out = append(out, d)
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

// Users returns every user, by name. PasswordHash is left empty.
func (db *DB) Users(ctx context.Context) ([]User, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, name, role, created_at FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		var u User
		var created int64
		if err := rows.Scan(&u.ID, &u.Name, &u.Role, &created); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		u.CreatedAt = fromMillis(created)
		out = append(out, u)
	}
	return out, rows.Err()
}

// AppendAudit writes one audit row (At, when zero, is now).
func (db *DB) AppendAudit(ctx context.Context, e AuditEntry) error {
	return db.insertAudit(ctx, db.write, e)
}

// execer is the write connection or one of its transactions.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertAudit writes one audit row through x: the write connection, or the transaction
// of the change it records, so that the change and its row commit together.
func (db *DB) insertAudit(ctx context.Context, x execer, e AuditEntry) error {
	if e.At.IsZero() {
		e.At = db.Now()
	}
	_, err := x.ExecContext(ctx, `INSERT INTO audit_log (at, actor, action, source, key, reason, previous_state)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, millis(e.At), e.Actor, e.Action, e.Source, e.Key, e.Reason, e.PreviousState)
	if err != nil {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	return nil
}

// Throttle is a sign-in throttling policy for one scope (a name at an address, or an
// address): it slows guessing down without ever shutting the scope out for good. Free
// failures are let through at once; from then on each failure makes the scope wait
// before its next try, First after the Free-th failure, twice as long after each further
// one, never longer than Max. A scope with no failure for Forget starts again from
// nothing (Forget is at most a day: older counts are deleted).
type Throttle struct {
	Free   int
	First  time.Duration
	Max    time.Duration
	Forget time.Duration
}

// throttleMemory is how long a scope's failures are kept at most.
const throttleMemory = 24 * time.Hour

// Wait is how long a scope waits after its last failure when it has failed n times.
func (t Throttle) Wait(n int) time.Duration {
	if n < t.Free {
		return 0
	}
	d := t.First
	for i := t.Free; i < n && d < t.Max; i++ {
		d *= 2
	}
	return min(d, t.Max)
}

// LoginAttempt reserves a password check against scopes at now. When none of them has
// to wait, it counts the attempt as a failure of each, before the password is checked,
// and returns zero: concurrent attempts are counted one after the other, so a burst of
// them cannot all pass while the first is being checked. A right password takes the
// count back with LoginSucceeded. When a scope has to wait, it counts nothing and returns
// until when the longest wait lasts. A scope whose last failure is older than its
// policy's Forget starts counting again.
func (db *DB) LoginAttempt(ctx context.Context, now time.Time, scopes map[string]Throttle) (time.Time, error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("login throttle: %w", err)
	}
	defer tx.Rollback()
	var until time.Time
	for scope, t := range scopes {
		var failures, last int64
		err := tx.QueryRowContext(ctx, `SELECT failures, last_at FROM login_failures WHERE scope = ?`, scope).
			Scan(&failures, &last)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("login throttle: %w", err)
		}
		lastAt := fromMillis(last)
		if !lastAt.Add(min(t.Forget, throttleMemory)).After(now) {
			continue // forgotten
		}
		if end := lastAt.Add(t.Wait(int(failures))); end.After(now) && end.After(until) {
			until = end
		}
	}
	if !until.IsZero() {
		return until, nil
	}
	for scope, t := range scopes {
		_, err := tx.ExecContext(ctx, `INSERT INTO login_failures (scope, failures, first_at, last_at) VALUES (?1, 1, ?2, ?2)
			ON CONFLICT (scope) DO UPDATE SET
				failures = CASE WHEN last_at <= ?2 - ?3 THEN 1 ELSE failures + 1 END,
				first_at = CASE WHEN last_at <= ?2 - ?3 THEN ?2 ELSE first_at END,
				last_at = ?2`, scope, millis(now), min(t.Forget, throttleMemory).Milliseconds())
		if err != nil {
			return time.Time{}, fmt.Errorf("login throttle: %w", err)
		}
	}
	// Old rows are of no use: keep the table to the scopes seen lately (by index).
	if _, err := tx.ExecContext(ctx, `DELETE FROM login_failures WHERE last_at < ?`, millis(now.Add(-throttleMemory))); err != nil {
		return time.Time{}, fmt.Errorf("login throttle: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return time.Time{}, fmt.Errorf("login throttle: %w", err)
	}
	return time.Time{}, nil
}

// LoginSucceeded takes back the attempt LoginAttempt counted, the password being right:
// the scope clear forgets its failures, and each scope in keep has this one attempt
// taken off its count (an address keeps the failures it made for other names).
func (db *DB) LoginSucceeded(ctx context.Context, clear string, keep ...string) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("login throttle: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM login_failures WHERE scope = ?`, clear); err != nil {
		return fmt.Errorf("login throttle: %w", err)
	}
	for _, scope := range keep {
		if _, err := tx.ExecContext(ctx, `UPDATE login_failures SET failures = failures - 1 WHERE scope = ? AND failures > 0`, scope); err != nil {
			return fmt.Errorf("login throttle: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("login throttle: %w", err)
	}
	return nil
}
