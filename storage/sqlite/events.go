package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// eventQuery is an events filter as SQL: the one condition an index answers ("drive"),
// the conditions checked on each row found ("check", written so that SQLite does not
// pick another index for them), and the id range every part shares.
type eventQuery struct {
	drive, check []string
	driveArgs    []any
	checkArgs    []any
}

// windowStart is the query of where a page's search stops: the oldest of the ScanWindow
// newest ids that the driving index finds in [lo, hi], or 0 when it finds fewer. One
// cursor stepped over the index finds it; gathering those ids into a list for the page
// query to check (id IN (...)) cost 8-10 ms more a page with 5 M deliveries.
func (q eventQuery) windowStart(lo, hi int64) (string, []any) {
	drive := append([]string{"id BETWEEN ? AND ?"}, q.drive...)
	return `SELECT coalesce((SELECT id FROM deliveries WHERE ` + strings.Join(drive, " AND ") +
			` ORDER BY id DESC LIMIT 1 OFFSET ?), 0)`,
		append(append([]any{lo, hi}, q.driveArgs...), storage.ScanWindow-1)
}

// pageQuery is the query of one page of up to limit deliveries in [lo, hi] that the
// driving index finds and the checks pass, newest first.
func (q eventQuery) pageQuery(lo, hi int64, limit int) (string, []any) {
	where := append(append([]string{"id BETWEEN ? AND ?"}, q.drive...), q.check...)
	args := append(append(append([]any{lo, hi}, q.driveArgs...), q.checkArgs...), limit)
	return `SELECT ` + deliveryListColumns + ` FROM deliveries WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY id DESC LIMIT ?`, args
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// idBounds turns f's time range and cursor into an id range: receipt times grow with
// ids, so a search at each end replaces a time condition on every row. Deliveries
// committed within the same instant may straddle a bound by a millisecond.
func (db *DB) idBounds(ctx context.Context, f storage.DeliveryFilter) (lo, hi int64, err error) {
	lo, hi = 1, 1<<63-1
	if f.Before > 0 {
		hi = f.Before - 1
	}
	if !f.From.IsZero() {
		if lo, err = db.firstReceivedSince(ctx, f.From, db.Now()); err != nil {
			return 0, 0, err
		}
	}
	if !f.To.IsZero() {
		first, err := db.firstReceivedSince(ctx, f.To, db.Now())
		if err != nil {
			return 0, 0, err
		}
		hi = min(hi, first-1)
	}
	return lo, hi, nil
}

// noneSince is firstReceivedSince's answer when no delivery was received since.
const noneSince = 1 << 62

// aheadSlack is how far after now a receipt time may lie and still count as one
// (firstReceivedSince): deliveries stored while a search runs, a clock stepped by a
// little. A stretch stamped less far ahead holds the retention sweep back that long
// at most.
const aheadSlack = time.Hour

// sqlIDRange is the lowest and highest delivery id (0, 0 without deliveries). Two
// subqueries: min and max side by side in one query read the whole table.
const sqlIDRange = `SELECT coalesce((SELECT min(id) FROM deliveries), 0), coalesce((SELECT max(id) FROM deliveries), 0)`

// sqlFirstFrom is the first delivery with an id from ?1 on, and when it was received.
const sqlFirstFrom = `SELECT id, received_at FROM deliveries WHERE id >= ? ORDER BY id LIMIT 1`

// firstReceivedSince returns the id of the first delivery received at or after t, or
// noneSince. Receipt times grow with ids, so it is a binary search over the table's
// ids, each step one look-up by id: some 25 steps with millions of deliveries, where an
// index of receipt times would cost intake one more B-tree write per delivery.
//
// A delivery stamped more than aheadSlack after now was stamped by a clock that ran
// ahead and was set right since: the ids after it were received before its stamp. The
// search steps over it as if received before t; otherwise a stretch of such stamps
// would end every search for a time before them there, and the retention sweep would
// keep every delivery after them until the real time caught up with the wrong stamps
// (once it has, they hold the sweep back until they are past retention themselves:
// retention late, never early, as the sweep checks each receipt time).
func (db *DB) firstReceivedSince(ctx context.Context, t, now time.Time) (int64, error) {
	at, ahead := millis(t), millis(now.Add(aheadSlack))
	// The first delivery with an id from id on, and when it was received (none: never).
	probe := func(id int64) (int64, int64, error) {
		var next, received int64
		err := db.read.QueryRowContext(ctx, sqlFirstFrom, id).Scan(&next, &received)
		if errors.Is(err, sql.ErrNoRows) {
			return noneSince, 1<<63 - 1, nil
		}
		return next, received, err
	}
	var lo, hi int64
	if err := db.read.QueryRowContext(ctx, sqlIDRange).Scan(&lo, &hi); err != nil {
		return 0, err
	}
	if hi == 0 {
		return noneSince, nil
	}
	// The answer is the first delivery from some x in [lo, hi] on: the smallest x whose
	// first delivery was received at or after t. Below lo, all were received before.
	for lo < hi {
		mid := lo + (hi-lo)/2
		id, received, err := probe(mid)
		if err != nil {
			return 0, err
		}
		if received >= at && received <= ahead {
			hi = mid
		} else {
			lo = id + 1 // no delivery between mid and id
		}
	}
	id, received, err := probe(lo)
	if err != nil || received < at || received > ahead {
		return noneSince, err
	}
	return id, nil
}

// Deliveries returns one page of the deliveries that match f, newest first. It stays fast
// at millions of deliveries: each page is found through one index, and a page whose
// filters need a look at each row examines at most ScanWindow rows (Partial then says
// so, and Next goes on from where it stopped).
func (db *DB) Deliveries(ctx context.Context, f storage.DeliveryFilter) (storage.DeliveryPage, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	lo, hi, err := db.idBounds(ctx, f)
	if err != nil {
		return storage.DeliveryPage{}, fmt.Errorf("events: %w", err)
	}
	var page storage.DeliveryPage
	if lo > hi {
		return page, nil
	}
	q := planEvents(f)
	// With checks on each row, the page searches a window of the driving index at most.
	var start int64
	if len(q.check) > 0 {
		query, args := q.windowStart(lo, hi)
		if err := db.read.QueryRowContext(ctx, query, args...).Scan(&start); err != nil {
			return storage.DeliveryPage{}, fmt.Errorf("events: %w", err)
		}
	}
	query, args := q.pageQuery(max(lo, start), hi, f.Limit+1)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return storage.DeliveryPage{}, fmt.Errorf("events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return storage.DeliveryPage{}, fmt.Errorf("events: %w", err)
		}
		page.Deliveries = append(page.Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return storage.DeliveryPage{}, fmt.Errorf("events: %w", err)
	}
	if len(page.Deliveries) > f.Limit {
		page.Deliveries = page.Deliveries[:f.Limit]
		page.Next = page.Deliveries[f.Limit-1].ID
		return page, nil
	}
	if start > lo {
		// Fewer than a page in a full window, and older deliveries left to search.
		page.Next, page.Partial = start, true
	}
	return page, nil
}

// EachDelivery calls fn for every delivery that matches f, as storage.EachDelivery does.
func (db *DB) EachDelivery(ctx context.Context, f storage.DeliveryFilter, fn func(storage.Delivery) error) error {
	return storage.EachDelivery(ctx, db.Deliveries, f, fn)
}

// RecentDuplicates returns up to limit duplicates that carried an amount, received at or
// after since, newest first: the refunds and cancellations caught.
func (db *DB) RecentDuplicates(ctx context.Context, since time.Time, limit int) ([]storage.Delivery, error) {
	lo, _, err := db.idBounds(ctx, storage.DeliveryFilter{From: since})
	if err != nil {
		return nil, fmt.Errorf("recent duplicates: %w", err)
	}
	rows, err := db.read.QueryContext(ctx, `SELECT `+deliveryListColumns+` FROM deliveries
		WHERE id IN (SELECT id FROM deliveries WHERE outcome = 'duplicate' AND outcome != 'accepted' AND id >= ?
			ORDER BY id DESC LIMIT ?)
		AND amount != '' ORDER BY id DESC LIMIT ?`, lo, storage.ScanWindow, limit)
	if err != nil {
		return nil, fmt.Errorf("recent duplicates: %w", err)
	}
	defer rows.Close()
	var out []storage.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("recent duplicates: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// plan chooses, for f, the most selective filter that has an index, in this order:
// key, booking, mismatch, source, outcome (duplicate or rejected). The unary + on the
// others keeps SQLite from choosing an index by guesswork (there are no statistics).
// Property, status, currency (or none of them), carrying an amount and accepted have no
// index: a few values share most rows, so a stretch of rows in id order finds a page of
// them.
func planEvents(f storage.DeliveryFilter) eventQuery {
	var q eventQuery
	driven := false
	// add adds one filter: as the driving condition when it has an index and none was
	// chosen yet, otherwise as a check written so that SQLite cannot use an index for it.
	// addArgs is add for a filter whose drive and check take different arguments.
	addArgs := func(indexed bool, drive string, driveArgs []any, check string, checkArgs []any) {
		if indexed && !driven {
			driven = true
			q.drive = append(q.drive, drive)
			q.driveArgs = append(q.driveArgs, driveArgs...)
			return
		}
		q.check = append(q.check, check)
		q.checkArgs = append(q.checkArgs, checkArgs...)
	}
	add := func(indexed bool, drive, check string, args ...any) { addArgs(indexed, drive, args, check, args) }
	// A batch holds at most a request's items: the most selective filter there is. Its
	// partial index is used only when the query implies batch != 0.
	if f.Batch != 0 {
		add(true, "batch = ? AND batch != 0", "+batch = ?", f.Batch)
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
			in := "%[1]ssource IN (" + placeholders(len(sources)) + ")"
			args = append(args, f.Key)
			addArgs(true, "id IN ("+sqlKeyIDs(in)+")", slices.Concat(args, args, args, args),
				fmt.Sprintf(in, "+")+" AND +key = ?", args)
		} else {
			add(false, "", "+key = ?", f.Key)
		}
	}
	// Flagged deliveries are found through the suspects, which are few.
	if f.Flag != "" || f.FlagState != "" {
		cond, args := "1", []any{}
		if f.Flag != "" && f.Flag != storage.FlagAny {
			cond, args = cond+" AND kind = ?", append(args, string(f.Flag))
		}
		if f.FlagState != "" {
			cond, args = cond+" AND state = ?", append(args, f.FlagState)
		}
		in := "id IN (SELECT delivery FROM suspects WHERE " + cond + ")"
		add(true, in, "+"+in, args...)
	}
	// The index of bookings leaves duplicates stored by reference out
	// (sqlWithReferrers), and is ordered by stretches of ids first (sqlBookingStretches).
	// A partial index is used only when the query implies its WHERE: hence the != ''.
	if f.Booking != "" {
		drive := "%[1]sbooking = ? AND %[1]sbooking != '' AND %[1]sid / 16384 IN (" + sqlBookingStretches + ")"
		addArgs(true, "id IN ("+sqlWithReferrers(drive)+")", []any{f.Booking, f.Booking}, "+booking = ?", []any{f.Booking})
	}
	if f.Mismatch || f.MoneyMismatch {
		add(true, "mismatch", "+mismatch != 0")
	}
	if f.MoneyMismatch {
		add(false, "", "+money_mismatch != 0")
	}
	if f.Source != "" && f.Key == "" { // with a key, the source is part of the key's condition
		add(true, "source = ?", "+source = ?", f.Source)
	}
	if f.Outcome != "" {
		add(f.Outcome != storage.Accepted, "outcome = ? AND outcome != 'accepted'", "+outcome = ?", string(f.Outcome))
	}
	if f.Property != "" {
		add(false, "", "+property = ?", f.Property)
	}
	if f.NoProperty {
		add(false, "", "+property = ''")
	}
	if f.Status != "" {
		add(false, "", "+event_status = ?", f.Status)
	}
	if f.Currency != "" {
		add(false, "", "+currency = ?", f.Currency)
	}
	if f.NoCurrency {
		add(false, "", "+currency = ''")
	}
	if f.HasAmount {
		add(false, "", "+amount != ''")
	}
	return q
}
