package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// sqlKeyWindow is the id of the oldest of the ScanWindow newest claims below a cursor,
// or 0 when fewer remain: a walk down the primary key's index.
const sqlKeyWindow = `SELECT coalesce((SELECT id FROM claims WHERE id < $1 ORDER BY id DESC LIMIT 1 OFFSET $2), 0)`

// Keys returns one page of the keys matching f, in ListKeys' order, for the console and
// the API. It stays fast at millions of keys: a listing that has to check each claim (a
// source's keys, the processed ones) looks at most at ScanWindow of them, newest first,
// and says so in Partial. ListKeys, for bulk releases and the command line, is exhaustive.
func (db *DB) Keys(ctx context.Context, f storage.KeyFilter) (storage.KeyPage, error) {
	if !textOK(f.Source, f.State) {
		return storage.KeyPage{}, nil // no claim has such a source or state
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var from int64
	if keysWalk(f) {
		if err := db.pool.QueryRow(ctx, sqlKeyWindow, keysBelow(f), storage.ScanWindow-1).Scan(&from); err != nil {
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
	if !textOK(f.Source, f.State) {
		return nil, nil // no claim has such a source or state
	}
	query, args := keyQuery(f, 0)
	return db.listKeys(ctx, query, args)
}

func (db *DB) listKeys(ctx context.Context, query string, args []any) ([]storage.Claim, error) {
	rows, err := db.pool.Query(ctx, query, args...)
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return out, nil
}

// sqlStuck selects the stuck claims, given (as $1) the time before which a processing
// key is stuck: Claim.Stuck in SQL. Its first condition is, word for word, the predicate
// of the partial indexes claims_stuck and claims_unsettled: PostgreSQL uses a partial
// index only where it can prove the query implies its predicate, which a parameter's
// value (in a generic plan) never does.
const sqlStuck = `state IN ('processing', 'failed') AND (state = 'failed' OR updated_at < $1)`

// StuckCounts counts the stuck keys of each source that has any. It reads only the
// keys that can be stuck, through claims_stuck, which holds all the count needs.
func (db *DB) StuckCounts(ctx context.Context, stuckBefore time.Time) (map[string]int, error) {
	rows, err := db.pool.Query(ctx, `SELECT source, count(*) FROM claims WHERE `+sqlStuck+` GROUP BY source`,
		millis(stuckBefore))
	if err != nil {
		return nil, fmt.Errorf("count stuck keys: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count stuck keys: %w", err)
		}
		out[s] = int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count stuck keys: %w", err)
	}
	return out, nil
}

// keyArgs are a keys query's parameters, numbered as they are added.
type keyArgs []any

// add appends v and returns its placeholder.
func (a *keyArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// keyQuery is the query of a keys listing for f. With from > 0 (a listing that walks,
// see keysWalk), it looks only at the claims from that id up to the cursor.
func keyQuery(f storage.KeyFilter, from int64) (string, []any) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var args keyArgs
	where := "true"
	if f.Source != "" {
		where += " AND source = " + args.add(f.Source)
	}
	if f.State != "" {
		where += " AND state = " + args.add(f.State)
	}
	// The state conditions in words repeat the partial indexes' predicates, so that the
	// keys that can be stuck (processing, failed) or were released come from indexes of
	// their own whatever plan a prepared statement gets (see sqlStuck).
	switch {
	case f.Stuck:
		where += " AND state IN ('processing', 'failed') AND (state = 'failed' OR updated_at < " +
			args.add(millis(f.StuckBefore)) + ")"
	case f.State == storage.StateProcessing || f.State == storage.StateFailed:
		where += " AND state IN ('processing', 'failed')"
	case f.State == storage.StateReleased:
		where += " AND state = 'released'"
	}
	order := "id DESC"
	switch {
	case f.Stuck:
		// claims_unsettled holds (updated_at, id): the row comparison is where its scan
		// starts, exactly, however many keys share the cursor's millisecond.
		order = "updated_at, id"
		if !f.After.IsZero() {
			where += " AND (updated_at, id) > (" + args.add(millis(f.After.UpdatedAt)) + ", " + args.add(f.After.ID) + ")"
		}
	case from > 0:
		where += " AND id >= " + args.add(from) + " AND id < " + args.add(keysBelow(f))
	case f.Before > 0:
		where += " AND id < " + args.add(f.Before)
	}
	limit := args.add(f.Limit)
	return `SELECT ` + claimColumns + ` FROM claims WHERE ` + where + ` ORDER BY ` + order + ` LIMIT ` + limit, args
}

// keysWalk reports whether f's listing walks the claims newest first and checks each one
// (a source, the processed state) rather than reading an index of its own: a source
// with few keys, or none yet, among millions would be a walk through every claim.
func keysWalk(f storage.KeyFilter) bool {
	if f.Stuck || f.State == storage.StateProcessing || f.State == storage.StateFailed || f.State == storage.StateReleased {
		return false
	}
	return f.Source != "" || f.State != ""
}

// keysBelow is the id that f's listing starts below.
func keysBelow(f storage.KeyFilter) int64 {
	if f.Before > 0 {
		return f.Before
	}
	return 1<<63 - 1
}
