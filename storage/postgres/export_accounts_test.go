package postgres

// The advisory locks that the accounts' tests hold from a connection of their own, to
// stop a transaction at a known point.
const (
	AuditLock         = auditLock
	SweepSessionsLock = sweepSessionsLock
)
