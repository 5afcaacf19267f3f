package postgres

import (
	"context"

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

// LeftTables are the tables a copy from SQLite leaves as Open made them.
var LeftTables = leftTables

// GenericPlans returns, for each statement prepared on the connection of db's pool
// that joins a table (db must have one connection only: the writers'), how many
// times PostgreSQL ran it by a generic plan.
func GenericPlans(ctx context.Context, db *DB) (map[string]int64, error) {
	rows, err := db.pool.Query(ctx, `SELECT statement, generic_plans FROM pg_prepared_statements
WHERE statement LIKE '%JOIN%' AND statement NOT LIKE '%pg_prepared_statements%'`)
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
