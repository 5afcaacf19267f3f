package sqlite

import (
	"context"
	"time"
)

// ExplainForensics returns the query plans of the lookups intake makes for a chunk of
// accepted deliveries, and of the key lab's, by name.
func (db *DB) ExplainForensics(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"business and correlation keys": {multiSQL(multiKeyFind, 2), []any{0, "", "h", 0, "ota", "k", "[1,2]", 1, "r", "i", 0, "ota", "l", "[3]"}},
		"traces":                        {multiSQL(multiTraceFind, 2), []any{0, "ota", []byte("h"), 1, "ota", []byte("i")}},
		"prior claims":                  {sqlPrior(2), []any{"ota", "a", "ota", "b"}},
		"any claim expired":             {sqlAnyExpired, []any{0}},
		"lab business key":              {sqlBusinessMatch, []any{"ota", "h", 0, "k"}},
		"lab correlation":               {sqlCorrelationMatch, []any{"r", "h", 0, "ota"}},
		"lab trace":                     {sqlTraceFind, []any{"ota", []byte("h")}},
	} {
		plan, err := db.explainWrite(ctx, q.sql, q.args...)
		if err != nil {
			return nil, err
		}
		out[name] = plan
	}
	return out, nil
}

// explainWrite is explain on the write connection, where intake's lookups run.
func (db *DB) explainWrite(ctx context.Context, query string, args ...any) (string, error) {
	return explainOn(ctx, db.write, query, args...)
}

// SetForensicFlushAt makes the writer move pending business and correlation keys once n
// are pending, until the returned func restores the default.
func SetForensicFlushAt(n int) (restore func()) {
	old := flushAt
	flushAt = n
	return func() { flushAt = old }
}

// ForensicKeyCounts returns how many business and correlation keys are pending, and
// how many the indexed tables hold.
func (db *DB) ForensicKeyCounts(ctx context.Context) (pending, indexed int, err error) {
	err = db.read.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM forensic_keys_pending),
	(SELECT count(*) FROM business_keys) + (SELECT count(*) FROM correlation_keys)`).Scan(&pending, &indexed)
	return pending, indexed, err
}

// SetBeforeBegin has the writer call f just before it begins each batch's transaction,
// until the returned func removes it: another process may commit there.
func SetBeforeBegin(f func()) (restore func()) {
	old := beforeBegin
	beforeBegin = f
	return func() { beforeBegin = old }
}

// QueuedRecords is how many Record requests wait for the writer.
func (db *DB) QueuedRecords() int { return len(db.reqs) }

// KeyFilters is how many filters of forensic keys the writer has taken into use: one
// once it has built its first, one more each time it built one again.
func (db *DB) KeyFilters() int64 { return db.keyFilters.Load() }

// SetFilterBuilt has every build of a writer's filter of keys call f once it has read
// the keys and handed the filter over, until the returned func removes it.
func SetFilterBuilt(f func()) (restore func()) {
	old := filterBuiltHook.Swap(&f)
	return func() { filterBuiltHook.Store(old) }
}

// SetFilterReading has every build of a writer's filter of keys call f while its
// query holds a read connection, until the returned func removes it.
func SetFilterReading(f func()) (restore func()) {
	old := filterReadingHook.Swap(&f)
	return func() { filterReadingHook.Store(old) }
}

// SetFilterQuiet has the writer build its filter of keys once no other connection has
// committed for d, until the returned func restores the default.
func SetFilterQuiet(d time.Duration) (restore func()) {
	old := filterQuiet
	filterQuiet = d
	return func() { filterQuiet = old }
}

// SetTracedMax has the writer build its filter of keys again once more than n traces
// were written on its connection between two of its batches, until the returned func
// restores the default.
func SetTracedMax(n int) (restore func()) {
	old := tracedMax
	tracedMax = n
	return func() { tracedMax = old }
}
