package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// sqlKeyWindow is the id of the oldest of the ScanWindow newest claims below a cursor,
// or 0 when fewer remain. Stepping a cursor over the rowids finds it in ~1 ms with 5 M
// claims; gathering the window's ids into a list (id IN (...)) took 8-12 ms.
const sqlKeyWindow = `SELECT coalesce((SELECT id FROM claims WHERE id < ? ORDER BY id DESC LIMIT 1 OFFSET ?), 0)`

// Keys returns one page of the keys matching f, in ListKeys' order, for the console and
// the API. It stays fast at millions of keys: a listing that has to check each claim (a
// source's keys, the processed ones) looks at most at ScanWindow of them, newest first,
// and says so in Partial. ListKeys, for bulk releases and the command line, is exhaustive.
func (db *DB) Keys(ctx context.Context, f storage.KeyFilter) (storage.KeyPage, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var from int64
	if keysWalk(f) {
		if err := db.read.QueryRowContext(ctx, sqlKeyWindow, keysBelow(f), storage.ScanWindow-1).Scan(&from); err != nil {
			return storage.KeyPage{}, fmt.Errorf("list keys: %w", err)
		}
	}
	// One more than a page says whether another follows.
	more := f
	more.Limit++
	query, args := keyQuery(more, from)
	claims, err := db.listKeys(ctx, query, args)
	if err != nil {
		return storage.KeyPage{}, err
	}
	return storage.PageOfKeys(claims, f, from), nil
}

// ListKeys returns every claim matching f, up to f.Limit. Stuck keys come oldest first
// (the longest stuck on top); other listings newest first.
func (db *DB) ListKeys(ctx context.Context, f storage.KeyFilter) ([]storage.Claim, error) {
	query, args := keyQuery(f, 0)
	return db.listKeys(ctx, query, args)
}

func (db *DB) listKeys(ctx context.Context, query string, args []any) ([]storage.Claim, error) {
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []storage.Claim
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

// query is the query of a keys listing for f. With from > 0 (a listing that walks,
// see walks), it looks only at the claims from that id up to the cursor.
func keyQuery(f storage.KeyFilter, from int64) (string, []any) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	// Without statistics SQLite served a source filter from the claims' UNIQUE(source,
	// key) index, reading every claim of the source to sort them (0.8-1.1 s with 5 M
	// keys), and a state filter by walking the whole table when few keys matched. So
	// the unary + keeps it off those indexes: most listings walk the newest claims
	// first, and the keys that can be stuck (processing, failed) or were released come
	// from partial indexes of their own.
	unsettled := !f.Stuck && (f.State == storage.StateProcessing || f.State == storage.StateFailed)
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
	case f.State == storage.StateReleased:
		table = "claims INDEXED BY claims_released"
		where += " AND state = 'released'"
	}
	order := "id DESC"
	switch {
	case f.Stuck && !f.After.IsZero():
		return stuckAfter(table, where, args, f)
	case f.Stuck:
		order = "updated_at, id"
	case from > 0:
		where += " AND id >= ? AND id < ?"
		args = append(args, from, keysBelow(f))
	case f.Before > 0:
		where += " AND id < ?"
		args = append(args, f.Before)
	}
	args = append(args, f.Limit)
	return `SELECT ` + claimColumns + ` FROM ` + table + ` WHERE ` + where + ` ORDER BY ` + order + ` LIMIT ?`, args
}

// stuckAfter is the query of a stuck listing's page after f.After: of the keys that
// pass where on table (claims_unsettled), first those of the cursor's millisecond with
// a greater id, then those of later milliseconds. SQLite does not seek an index by a
// row value whose second column is the rowid, as (updated_at, id) > (?, ?) would need:
// it would seek to the millisecond and read every key of it shown before, a batch's
// worth on each page. Each arm seeks exactly, both come in (updated_at, id) order, and
// UNION ALL merges them without a sort, reading no more than the page.
func stuckAfter(table, where string, args []any, f storage.KeyFilter) (string, []any) {
	at := millis(f.After.UpdatedAt)
	arm := `SELECT ` + claimColumns + ` FROM ` + table + ` WHERE ` + where
	all := make([]any, 0, 2*len(args)+4)
	all = append(append(all, args...), at, f.After.ID)
	all = append(append(all, args...), at, f.Limit)
	return arm + ` AND updated_at = ? AND id > ? UNION ALL ` + arm + ` AND updated_at > ? ORDER BY updated_at, id LIMIT ?`, all
}

// walks reports whether f's listing walks the claims newest first and checks each one
// (a source, the processed state) rather than reading an index of its own: a source
// with few keys, or none yet, among millions would be a walk through every claim.
func keysWalk(f storage.KeyFilter) bool {
	if f.Stuck || f.State == storage.StateProcessing || f.State == storage.StateFailed || f.State == storage.StateReleased {
		return false
	}
	return f.Source != "" || f.State != ""
}

// below is the id that f's listing starts below.
func keysBelow(f storage.KeyFilter) int64 {
	if f.Before > 0 {
		return f.Before
	}
	return 1<<63 - 1
}
