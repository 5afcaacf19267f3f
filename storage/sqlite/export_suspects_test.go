package sqlite

import (
	"context"

	"github.com/hookdedup/hookdedup/storage"
)

// ExplainSuspectCounts returns the query plans of what SuspectCounts and OpenSuspects
// read: the running totals, the suspects after the mark, and the open suspects per
// source, one step a line.
func (db *DB) ExplainSuspectCounts(ctx context.Context) (string, error) {
	var plan string
	for _, q := range []string{sqlSuspectTotals, sqlSuspectTail, sqlOpenSuspects} {
		p, err := db.explain(ctx, q, storage.CurrencyTable())
		if err != nil {
			return "", err
		}
		plan += p
	}
	return plan, nil
}
