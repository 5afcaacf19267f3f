package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// forensicsBefore runs, in a claim's transaction, before any key of ask is claimed:
// what the checks need to read before the claims change it (the processed claims a row
// may take over, whose traces make late duplicates).
func (db *DB) forensicsBefore(ctx context.Context, tx pgx.Tx, ask []*recordRow) error { return nil }

// forensicsAfter runs, in a claim's transaction, once every row is claimed and
// inserted: money mismatches, business keys, late duplicates and correlations, which
// may flag a row (suspects) or block it (a duplicate instead).
func (db *DB) forensicsAfter(ctx context.Context, tx pgx.Tx, rows []*recordRow) error { return nil }
