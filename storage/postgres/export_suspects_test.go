package postgres

import "context"

// RollupSuspectsLock is the advisory lock of RollupSuspects.
const RollupSuspectsLock = rollupSuspectsLock

// SQLSuspectFold is the roll-up's read of the suspects it folds: after the mark $1, up
// to the safe id $2, $3 at most.
const SQLSuspectFold = sqlSuspectFold

// ExplainSuspectCounts returns the plans by which SuspectCounts and OpenSuspects read
// the suspects after mark, planned for it as they are.
func (db *DB) ExplainSuspectCounts(ctx context.Context, mark int64) (string, error) {
	a, err := db.explain(ctx, false, sqlSuspectTail, mark)
	if err != nil {
		return "", err
	}
	b, err := db.explain(ctx, false, sqlOpenSuspects, mark, true)
	return a + b, err
}
