package postgres

// The sweeps' advisory locks, for tests that hold one as another replica would.
const (
	SweepAlertsLock     = sweepAlertsLock
	SweepRejectionsLock = sweepRejectionsLock
)
