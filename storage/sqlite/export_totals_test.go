package sqlite

// TotalsRead is how many deliveries the roll-ups have read rather than folded from
// what the writer kept.
func (db *DB) TotalsRead() int64 { return db.totals.read.Load() }
