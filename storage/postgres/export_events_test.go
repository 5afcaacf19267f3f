package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// The roll-ups' advisory locks, for tests that hold one as another replica would.
const (
	RollupStatsLock  = rollupStatsLock
	RollupLedgerLock = rollupLedgerLock
)

// ExplainEvents returns PostgreSQL's plans for a page of f, as EXPLAIN writes them: the
// query that finds where its window starts (when f checks each row), then the page
// query, over the whole id range. With analyze, the queries run and the plans say what
// each step read.
func (db *DB) ExplainEvents(ctx context.Context, f storage.DeliveryFilter, analyze bool) (string, error) {
	q := planEvents(f)
	var plan string
	if len(q.check) > 0 {
		query, args := q.windowStart(1, 1<<62)
		p, err := db.explain(ctx, analyze, query, args...)
		if err != nil {
			return "", err
		}
		plan = p
	}
	query, args := q.pageQuery(1, 1<<62, 51)
	p, err := db.explain(ctx, analyze, query, args...)
	return plan + p, err
}

// ExplainReceivedSince returns the plan of the binary search of receipt times.
func (db *DB) ExplainReceivedSince(ctx context.Context, analyze bool) (string, error) {
	return db.explain(ctx, analyze, sqlFirstReceivedSince, int64(0), int64(1<<62), int64(noneSince))
}

// ExplainRecentDuplicates returns the plan of RecentDuplicates' query.
func (db *DB) ExplainRecentDuplicates(ctx context.Context, analyze bool) (string, error) {
	return db.explain(ctx, analyze, sqlRecentDuplicates, int64(1), storage.ScanWindow, 10)
}

func (db *DB) explain(ctx context.Context, analyze bool, query string, args ...any) (string, error) {
	opts := "EXPLAIN "
	if analyze {
		opts = "EXPLAIN (ANALYZE, BUFFERS) "
	}
	rows, err := db.pool.Query(ctx, opts+query, args...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	return strings.Join(lines, "\n") + "\n", nil
}
