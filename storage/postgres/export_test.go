package postgres

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
