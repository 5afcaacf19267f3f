package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The advisory locks of the sweeps, for tests that hold one as another replica would.
const (
	SweepExpiredLock    = sweepExpiredLock
	SweepDeliveriesLock = sweepDeliveriesLock
)

// QueuedRecords is how many Record and RecordBatch calls wait in db's queue for a
// writer to take them.
func QueuedRecords(db *DB) int { return len(db.intake.reqs) }

// SetsConnectTimeout is setsConnectTimeout.
var SetsConnectTimeout = setsConnectTimeout

// LeftTables are the tables a copy from SQLite leaves as Open made them.
var LeftTables = leftTables

// joining picks, of pg_prepared_statements, the statements that join a table: with a
// JOIN, or a DELETE's USING.
const joining = `(statement LIKE '%JOIN%' OR statement LIKE '%USING%') AND statement NOT LIKE '%pg_prepared_statements%'`

// GenericPlans returns, for each statement prepared on the connection of db's pool
// that joins a table (db must have one connection only: the writers'), how many
// times PostgreSQL ran it by a generic plan.
func GenericPlans(ctx context.Context, db *DB) (map[string]int64, error) {
	rows, err := db.pool.Query(ctx, `SELECT statement, generic_plans FROM pg_prepared_statements WHERE `+joining)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var stmt string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&stmt, &n}, func() error {
		out[stmt] = n
		return nil
	})
	return out, err
}

// GenericPlanShapes returns, for each statement prepared on the connection of db's
// pool that joins a table (db must have one connection only: the writers'), the plan
// PostgreSQL runs it by when it runs a generic one: the cached one if it made one, or
// one made now, under the session's settings, if not.
func GenericPlanShapes(ctx context.Context, db *DB) (map[string]string, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	type prepared struct {
		name, stmt string
		params     int
	}
	rows, err := conn.Query(ctx, `SELECT name, statement, cardinality(parameter_types) FROM pg_prepared_statements WHERE `+joining)
	if err != nil {
		return nil, err
	}
	var all []prepared
	var p prepared
	if _, err := pgx.ForEachRow(rows, []any{&p.name, &p.stmt, &p.params}, func() error {
		all = append(all, p)
		return nil
	}); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		return nil, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `RESET plan_cache_mode`)
	out := map[string]string{}
	for _, p := range all {
		args := strings.TrimSuffix(strings.Repeat("NULL, ", p.params), ", ")
		rows, err := conn.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE `+pgx.Identifier{p.name}.Sanitize()+`(`+args+`)`,
			pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return nil, err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		out[p.stmt] = strings.Join(lines, "\n")
	}
	return out, nil
}

// SetMoneyRead makes a reprocess under thresholds run f once it has read its keys'
// money, before its transaction begins.
func (db *DB) SetMoneyRead(f func()) { db.moneyRead = f }

// MigrateLock is the advisory lock the replica that migrates holds, for tests that hold
// it as another replica would.
const MigrateLock = migrateLock

// ReportWaitsEvery makes a migration, and a wait for another's, logged every d instead
// of every waitReport, until the test ends. The test must not run in parallel.
func ReportWaitsEvery(t interface{ Cleanup(func()) }, d time.Duration) {
	was := waitReport
	waitReport = d
	t.Cleanup(func() { waitReport = was })
}

// Setting returns the setting name as a connection of db's pool has it.
func Setting(ctx context.Context, db *DB, name string) (string, error) {
	var v string
	err := db.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}

// SetLookupHost makes Open resolve host names with lookup until the test ends.
func SetLookupHost(t interface{ Cleanup(func()) }, lookup func(ctx context.Context, host string) ([]string, error)) {
	lookupHost = lookup
	t.Cleanup(func() { lookupHost = nil })
}

// LockID is the id of the advisory lock named lock (one of the locks above) of db's
// installation, for a test that holds it as another replica would.
func LockID(db *DB, lock int64) int64 { return db.locks.id(lock) }

// ShowSetting is the value of the server's setting name on a connection of db's pool.
func ShowSetting(ctx context.Context, db *DB, name string) (string, error) {
	var v string
	err := db.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}

// SetClockEvery sets how often the databases opened from now on read the server's
// clock, until tb ends; the databases must be closed by then.
func SetClockEvery(tb interface{ Cleanup(func()) }, d time.Duration) {
	old := clockEvery
	clockEvery = d
	tb.Cleanup(func() { clockEvery = old })
}

// ResetPool closes db's idle connections and those in use once they come back: the
// next are made anew, under the settings the server gives new sessions.
func ResetPool(db *DB) { db.pool.Reset() }
