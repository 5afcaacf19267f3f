package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// The roll-ups' advisory locks, for tests that hold one as another replica would.
const (
	RollupStatsLock  = rollupStatsLock
	RollupLedgerLock = rollupLedgerLock
)

// ExplainEvents returns PostgreSQL's plans for the first page of f, as EXPLAIN writes
// them: the query that finds where its window starts (when f checks each row), then
// the page query, over the id range that Deliveries would search. With analyze, the
// queries run and the plans say what each step read.
func (db *DB) ExplainEvents(ctx context.Context, f storage.DeliveryFilter, analyze bool) (string, error) {
	lo, hi, err := db.idBounds(ctx, f)
	if err != nil {
		return "", err
	}
	q := planEvents(f)
	var plan string
	var start int64
	if len(q.check) > 0 {
		query, args := q.windowStart(lo, hi)
		p, err := db.explain(ctx, analyze, query, args...)
		if err != nil {
			return "", err
		}
		plan = p
		if err := db.pool.QueryRow(ctx, query, customPlan(args)...).Scan(&start); err != nil {
			return "", err
		}
	}
	query, args := q.pageQuery(max(lo, start), hi, 51)
	p, err := db.explain(ctx, analyze, query, args...)
	return plan + p, err
}

// LedgerPlans returns the plans of the ledger's read of the duplicates not rolled up
// and of RollupLedger's read of the duplicates to fold.
func (db *DB) LedgerPlans(ctx context.Context, analyze bool) (string, error) {
	a, err := db.explain(ctx, analyze, `SELECT id FROM deliveries WHERE `+sqlDuplicates+` AND id > $1
	ORDER BY outcome, id LIMIT `+strconv.Itoa(statsTail), int64(0))
	if err != nil {
		return "", err
	}
	b, err := db.explain(ctx, analyze, `SELECT id FROM deliveries WHERE `+sqlDuplicates+` AND id > $1 AND id <= $2
	ORDER BY outcome, id LIMIT $3`, int64(0), int64(1<<62), 1000)
	return a + b, err
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
	rows, err := db.pool.Query(ctx, opts+query, customPlan(args)...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// ExplainKeys returns PostgreSQL's plan of a page of Keys for f (a listing that does
// not walk), with f's values known to the planner as Keys runs it.
func (db *DB) ExplainKeys(ctx context.Context, f storage.KeyFilter) (string, error) {
	query, args := keyQuery(f, 0)
	return db.explain(ctx, false, query, args...)
}

// ExplainKeysGeneric returns the plan PostgreSQL runs a page of Keys for f by once it
// has cached a generic plan of the statement: the one made without the values.
func (db *DB) ExplainKeysGeneric(ctx context.Context, f storage.KeyFilter) (string, error) {
	query, args := keyQuery(f, 0)
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		return "", err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `RESET plan_cache_mode`)
	if _, err := conn.Exec(ctx, `PREPARE keys_plan AS `+query); err != nil {
		return "", err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `DEALLOCATE keys_plan`)
	params := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			params[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		default:
			params[i] = fmt.Sprint(v)
		}
	}
	rows, err := conn.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE keys_plan(`+strings.Join(params, ", ")+`)`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	return strings.Join(lines, "\n") + "\n", nil
}
