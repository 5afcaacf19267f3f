package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// CheckpointerStopped reports whether the checkpointer has returned while the database
// is still open (checkpoint.go: once the file has left its path).
func (db *DB) CheckpointerStopped() bool {
	select {
	case <-db.checkpointerDone:
		return true
	default:
		return false
	}
}

// WALRestarts is how many times the writer finished a checkpoint that the checkpointer
// had caught up, so that the WAL could start over (checkpoint.go).
func (db *DB) WALRestarts() int64 { return db.walRestarts.Load() }

// CheckpointerStats is how many of the checkpointer's passes copied pages, how many times
// it fsynced the database file before it handed the writer a final pass, and how many of
// its passes it fsynced because it could not start their writes (checkpoint.go).
func (db *DB) CheckpointerStats() (passes, fsyncs, fallbacks int64) {
	return db.cpPasses.Load(), db.cpFsyncs.Load(), db.cpFallbacks.Load()
}

// SetStartWriteBack makes the checkpointers of the databases opened after it, until the
// test ends, start their passes' writes with f.
func SetStartWriteBack(tb testing.TB, f func(fd int) error) {
	old := startWriteBack
	startWriteBack = f
	tb.Cleanup(func() { startWriteBack = old })
}

// SetFdatasyncFile makes the checkpointers of the databases opened after it, until the
// test ends, flush the database file with f.
func SetFdatasyncFile(tb testing.TB, f func(fd int) error) {
	old := fdatasyncFile
	fdatasyncFile = f
	tb.Cleanup(func() { fdatasyncFile = old })
}

// BatchStats is how many batches the writer has taken and how many deliveries they held.
func (db *DB) BatchStats() (batches, rows int64) { return db.batches.Load(), db.batchRows.Load() }

// ExplainEvents returns SQLite's query plans for a page of f, one line per step: the
// query that finds where its window starts (when f checks each row), then the page
// query. For tests that check no filter scans the table.
func (db *DB) ExplainEvents(ctx context.Context, f storage.DeliveryFilter) (string, error) {
	q := planEvents(f)
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
	return db.explain(ctx, sqlKeyDeliveries, "s", "k", "s", "k", "s", "k", "s", "k", 101)
}

// ExplainKeys returns the query plan of ListKeys for f or, with window, of Keys: for a
// listing that walks, the query that finds where its window starts, then the page.
func (db *DB) ExplainKeys(ctx context.Context, f storage.KeyFilter, window bool) (string, error) {
	var from int64
	var plan string
	if window && keysWalk(f) {
		from = 1
		p, err := db.explain(ctx, sqlKeyWindow, keysBelow(f), storage.ScanWindow-1)
		if err != nil {
			return "", err
		}
		plan = p
	}
	query, args := keyQuery(f, from)
	p, err := db.explain(ctx, query, args...)
	return plan + p, err
}

// ExplainStuckCounts returns the query plan of StuckCounts.
func (db *DB) ExplainStuckCounts(ctx context.Context) (string, error) {
	return db.explain(ctx, sqlStuckCounts, 0)
}

func (db *DB) explain(ctx context.Context, query string, args ...any) (string, error) {
	return explainOn(ctx, db.read, query, args...)
}

// explainOn is the query plan of query on one pool, one step a line.
func explainOn(ctx context.Context, pool *sql.DB, query string, args ...any) (string, error) {
	rows, err := pool.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
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

// ExplainHolders returns the query plan of the writer's look-up of the claims that
// duplicates lost to, for a chunk of rows.
func ExplainHolders(ctx context.Context, db *DB, rows int) (string, error) {
	args := make([]any, 0, 5*rows)
	for i := range rows {
		args = append(args, i+1, "ota", fmt.Sprint("k", i), []byte("{}"), "BK-1")
	}
	return db.explain(ctx, kindHolder.sql(rows), args...)
}

// ExplainHandOverBodies returns the query plan of the retention sweep's hand-over of
// bodies to the duplicates that refer to a delivery it deletes.
func (db *DB) ExplainHandOverBodies(ctx context.Context) (string, error) {
	return db.explain(ctx, sqlHandOverBodies, 1, 0, 1000, 1)
}

// ExplainSweepDeliveries returns the query plan of the retention sweep's delete, which
// keeps the first items whose envelope other items still read.
func (db *DB) ExplainSweepDeliveries(ctx context.Context) (string, error) {
	return db.explain(ctx, sqlSweepDeliveries, 1, 0, 1000, 1)
}

// ExplainReceivedSince returns the query plans of the binary search of receipt times:
// the id range, then one step.
func (db *DB) ExplainReceivedSince(ctx context.Context) (string, error) {
	a, err := db.explain(ctx, sqlIDRange)
	if err != nil {
		return "", err
	}
	b, err := db.explain(ctx, sqlFirstFrom, 1)
	return a + b, err
}

// WriterCacheSize bounds the write connection's page cache.
const WriterCacheSize = writerCacheSize

// SetBigFile makes a file larger than size count as past the lock byte's page, and the
// writer look at the file's size every batches batches, for the databases opened after
// it until the test ends.
func SetBigFile(tb testing.TB, size int64, batches int) {
	oldSize, oldEvery := bigFileSize, writerCheckEvery
	bigFileSize, writerCheckEvery = size, batches
	tb.Cleanup(func() { bigFileSize, writerCheckEvery = oldSize, oldEvery })
}

// PageSettings returns PRAGMA cache_size and mmap_size as a read connection and the
// write connection have them.
func (db *DB) PageSettings(ctx context.Context) (readCache, readMmap, writeCache, writeMmap int64, err error) {
	for _, p := range []struct {
		pool interface {
			QueryRowContext(context.Context, string, ...any) *sql.Row
		}
		cache, mmap *int64
	}{{db.read, &readCache, &readMmap}, {db.write, &writeCache, &writeMmap}} {
		if err = p.pool.QueryRowContext(ctx, "PRAGMA cache_size").Scan(p.cache); err != nil {
			return
		}
		if err = p.pool.QueryRowContext(ctx, "PRAGMA mmap_size").Scan(p.mmap); err != nil {
			return
		}
	}
	return
}

// ExplainAlerts returns the query plan of a page of Alerts for f.
func (db *DB) ExplainAlerts(ctx context.Context, f storage.AlertFilter) (string, error) {
	query, args, err := alertsQuery(f)
	if err != nil {
		return "", err
	}
	return db.explain(ctx, query, args...)
}

// ExplainActiveAlerts returns the query plan of ActiveAlerts.
func (db *DB) ExplainActiveAlerts(ctx context.Context) (string, error) {
	return db.explain(ctx, sqlActiveAlerts)
}

// ExplainSweepAlerts returns the query plan of SweepAlerts.
func (db *DB) ExplainSweepAlerts(ctx context.Context) (string, error) {
	return db.explain(ctx, sqlSweepAlerts, 1, 1000)
}

// SetMoneyRead makes a reprocess under thresholds run f once it has read its keys'
// money, before its transaction begins.
func (db *DB) SetMoneyRead(f func()) { db.moneyRead = f }

// SetBeforeRestoreSwap makes every restore until the test ends run f just before it
// renames the restored file onto the database's path.
func SetBeforeRestoreSwap(tb testing.TB, f func()) {
	old := beforeRestoreSwap
	beforeRestoreSwap = f
	tb.Cleanup(func() { beforeRestoreSwap = old })
}
