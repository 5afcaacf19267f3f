package postgres

// RollupSuspectsLock is the advisory lock of RollupSuspects.
const RollupSuspectsLock = rollupSuspectsLock

// The statements by which the suspects' counts read the suspects after the mark, and
// the roll-up those it folds, with their arguments: for tests of their plans.
const (
	SQLSuspectTailChunk = sqlSuspectTailChunk
	SQLSuspectFold      = sqlSuspectFold
)
