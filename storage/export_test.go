package storage

import (
	"context"
	"strings"
)

// WALRestarts is how many times the writer finished a checkpoint that the checkpointer
// had caught up, so that the WAL could start over (checkpoint.go).
func (db *DB) WALRestarts() int64 { return db.walRestarts.Load() }

// ExplainEvents returns SQLite's query plans for a page of f, one line per step: the
// query that finds where its window starts (when f checks each row), then the page
// query. For tests that check no filter scans the table.
func (db *DB) ExplainEvents(ctx context.Context, f DeliveryFilter) (string, error) {
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

// ExplainSweepExpired returns the query plan of SweepExpired.
func (db *DB) ExplainSweepExpired(ctx context.Context) (string, error) {
	return db.explain(ctx, sqlSweepExpired, 1, 1000)
}
