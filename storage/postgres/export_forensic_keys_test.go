package postgres

// The look-ups of business and correlation keys of intake's transactions, and the
// settings those run under, for tests that read their plans.
const (
	SQLIndexPlans        = sqlIndexPlans
	SQLBusinessLookup    = sqlBusinessLookup
	SQLCorrelationLookup = sqlCorrelationLookup
)
