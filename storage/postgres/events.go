package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// eventQuery is an events filter as SQL, with ? for its arguments (numbered by bind):
// the one condition that an index answers and that orders the page ("drive"), the
// conditions checked on each row found ("check"), and the id range every part shares.
type eventQuery struct {
	drive, check []string
	driveArgs    []any
	checkArgs    []any
	// lead is the driving index's columns before the id, when the query must name
	// them in its ORDER BY (see planEvents' addOrdered), with a comma after each.
	lead string
}

// windowStart is the query of where a page's search stops: the oldest of the ScanWindow
// newest ids that the driving index finds in [lo, hi], or 0 when it finds fewer.
func (q eventQuery) windowStart(lo, hi int64) (string, []any) {
	drive := append([]string{"id BETWEEN ? AND ?"}, q.drive...)
	return bind(`SELECT coalesce((SELECT id FROM deliveries WHERE ` + strings.Join(drive, " AND ") +
			` ORDER BY ` + q.descending() + ` LIMIT 1 OFFSET ?), 0)`),
		append(append([]any{lo, hi}, q.driveArgs...), storage.ScanWindow-1)
}

// pageQuery is the query of one page of up to limit deliveries in [lo, hi] that the
// driving index finds and the checks pass, newest first.
func (q eventQuery) pageQuery(lo, hi int64, limit int) (string, []any) {
	where := append(append([]string{"id BETWEEN ? AND ?"}, q.drive...), q.check...)
	args := append(append(append([]any{lo, hi}, q.driveArgs...), q.checkArgs...), limit)
	return bind(`SELECT ` + deliveryListColumns + ` FROM deliveries WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY ` + q.descending() + ` LIMIT ?`), args
}

// descending is the ORDER BY of a page, newest first, in the driving index's terms.
func (q eventQuery) descending() string {
	if q.lead == "" {
		return "id DESC"
	}
	return strings.ReplaceAll(q.lead, ",", " DESC,") + " id DESC"
}

// customPlan is args for a query that PostgreSQL must plan with their values each time
// it runs. pgx would otherwise prepare the query once per connection, and after a few
// runs PostgreSQL may settle on a generic plan, one for any values, whenever its
// estimate looks no worse: such a plan cannot use the partial index of outcomes (a
// parameter does not imply its WHERE; checked: a sequential scan and a sort of every
// match) and cannot tell a rare value from a common one. A page is planned in well
// under a millisecond.
func customPlan(args []any) []any {
	return append([]any{pgx.QueryExecModeExec}, args...)
}

// bind numbers query's ? placeholders $1, $2, … in order: a filter's conditions are
// written once and land in queries where their arguments take different places.
func bind(query string) string {
	var b strings.Builder
	n := 0
	for {
		i := strings.IndexByte(query, '?')
		if i < 0 {
			b.WriteString(query)
			return b.String()
		}
		n++
		b.WriteString(query[:i])
		b.WriteString("$" + strconv.Itoa(n))
		query = query[i+1:]
	}
}

// idBounds turns f's time range and cursor into an id range: receipt times grow with
// ids, so a search at each end replaces a time condition on every row (see
// firstReceivedSince).
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
		if err := db.pool.QueryRow(ctx, query, customPlan(args)...).Scan(&start); err != nil {
			return storage.DeliveryPage{}, fmt.Errorf("events: %w", err)
		}
	}
	query, args := q.pageQuery(max(lo, start), hi, f.Limit+1)
	page.Deliveries, err = collectDeliveries(db.pool.Query(ctx, query, customPlan(args)...))
	if err != nil {
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
// after since, newest first: the refunds and cancellations caught. It looks at the
// newest ScanWindow duplicates at most, through the index of duplicates and rejections.
func (db *DB) RecentDuplicates(ctx context.Context, since time.Time, limit int) ([]storage.Delivery, error) {
	lo, _, err := db.idBounds(ctx, storage.DeliveryFilter{From: since})
	if err != nil {
		return nil, fmt.Errorf("recent duplicates: %w", err)
	}
	out, err := collectDeliveries(db.pool.Query(ctx, sqlRecentDuplicates, lo, storage.ScanWindow, limit))
	if err != nil {
		return nil, fmt.Errorf("recent duplicates: %w", err)
	}
	return out, nil
}

// sqlRecentDuplicates is up to $3 duplicates with an amount among the newest $2 from
// id $1 on. The first id of those $2 comes first, from the index alone; the page then
// walks the index backwards from the newest, and stops at its $3rd row or at that id.
// (A subquery of the $2 newest, filtered, would be planned as if all $2 rows were
// wanted: PostgreSQL would read every duplicate and sort them.)
const sqlRecentDuplicates = `SELECT ` + deliveryListColumns + ` FROM deliveries
WHERE ` + sqlDuplicates + ` AND amount <> '' AND id >= GREATEST($1, coalesce((
	SELECT id FROM deliveries WHERE ` + sqlDuplicates + ` AND id >= $1
	ORDER BY outcome DESC, id DESC LIMIT 1 OFFSET $2::bigint - 1), 0))
ORDER BY outcome DESC, id DESC LIMIT $3`

// sqlDuplicates selects the duplicates, in a query ordered by (outcome, id): through
// the index of duplicates and rejections, whatever PostgreSQL's statistics say (see
// planEvents' addOrdered).
const sqlDuplicates = `outcome = ANY('{duplicate}')`

// planEvents chooses, for f, the most selective filter that has an index, in this
// order: batch, key, flag, booking, mismatch, source, outcome (duplicate or rejected);
// the others are checked on each row the driving index finds. Property, status,
// currency (or none of them), carrying an amount and accepted have no index: a few
// values share most rows, so a stretch of rows in id order finds a page of them.
func planEvents(f storage.DeliveryFilter) eventQuery {
	var q eventQuery
	driven := false
	// add adds one filter: as the driving condition when it has an index and none was
	// chosen yet, otherwise as a check.
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
	// addOrdered adds a filter on one value of col, whose index is (col, id), for a
	// filter that many rows match: a source, an outcome.
	// Written col = value, PostgreSQL would know col constant, take the index's order
	// for the id alone, and be free to walk the primary key instead, keeping the rows
	// of that value: its statistics call that cheapest for a common value, and it is,
	// unless the newest rows hold none of it (a source gone quiet, rejections that came
	// in a burst last week), when the walk reads the whole table. Written col =
	// ANY(array of the value) and ordered by (col, id), the page has an order that only
	// the index gives without sorting every match: each page walks the filter's own
	// index, as on SQLite, whatever the statistics say. The index of outcomes is
	// partial (no accepted deliveries); PostgreSQL sees that the value's array implies
	// its WHERE as it plans each page with its values (customPlan), so no condition of
	// that WHERE is added: it would count twice in the estimates, which then favour a
	// sort of every rejection.
	addOrdered := func(indexed bool, col, value string) {
		if indexed && !driven {
			add(true, col+" = ANY(?)", "", []string{value})
			q.lead = col + ","
			return
		}
		add(false, "", col+" = ?", value)
	}
	// A batch holds at most a request's items: the most selective filter there is. A
	// partial index is used only when the query implies its WHERE: hence the <> 0.
	if f.Batch != 0 {
		add(true, "batch = ? AND batch <> 0", "batch = ?", f.Batch)
	}
	if f.Key != "" {
		sources := f.KeySources
		if f.Source != "" {
			sources = []string{f.Source}
		}
		if len(sources) > 0 {
			texts := make([]string, len(sources))
			for i, s := range sources {
				texts[i] = textSafe(s)
			}
			add(true, "source = ANY(?) AND key = ?", "source = ANY(?) AND key = ?", texts, textSafe(f.Key))
		} else {
			add(false, "", "key = ?", textSafe(f.Key))
		}
	}
	// Flagged deliveries are found through the suspects, which are few.
	if f.Flag != "" || f.FlagState != "" {
		cond, args := "true", []any{}
		if f.Flag != "" && f.Flag != storage.FlagAny {
			cond, args = cond+" AND kind = ?", append(args, textSafe(string(f.Flag)))
		}
		if f.FlagState != "" {
			cond, args = cond+" AND state = ?", append(args, textSafe(f.FlagState))
		}
		in := "id IN (SELECT delivery FROM suspects WHERE " + cond + ")"
		add(true, in, in, args...)
	}
	if f.Booking != "" {
		add(true, "booking = ? AND booking <> ''", "booking = ?", textSafe(f.Booking))
	}
	if f.Mismatch || f.MoneyMismatch {
		add(true, "mismatch", "mismatch")
	}
	if f.MoneyMismatch {
		add(false, "", "money_mismatch")
	}
	if f.Source != "" && f.Key == "" { // with a key, the source is part of the key's condition
		addOrdered(true, "source", textSafe(f.Source))
	}
	if f.Outcome != "" {
		addOrdered(f.Outcome != storage.Accepted, "outcome", textSafe(string(f.Outcome)))
	}
	if f.Property != "" {
		add(false, "", "property = ?", textSafe(f.Property))
	}
	if f.NoProperty {
		add(false, "", "property = ''")
	}
	if f.Status != "" {
		add(false, "", "event_status = ?", textSafe(f.Status))
	}
	if f.Currency != "" {
		add(false, "", "currency = ?", textSafe(f.Currency))
	}
	if f.NoCurrency {
		add(false, "", "currency = ''")
	}
	if f.HasAmount {
		add(false, "", "amount <> ''")
	}
	return q
}
