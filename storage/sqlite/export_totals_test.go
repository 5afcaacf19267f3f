package sqlite

// CastReal is castReal: an amount as the stats total it, and whether it could.
func CastReal(amount string) (float64, bool) { return castReal(amount) }

// TotalsRead is how many deliveries the roll-ups have read rather than folded from
// what the writer kept.
func (db *DB) TotalsRead() int64 { return db.totals.read.Load() }
