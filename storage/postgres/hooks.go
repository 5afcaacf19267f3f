package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// forensicsBefore runs, in a claim's transaction, before any key of ask is claimed:
// the expired processed claims that rows of ask are about to take over leave their
// traces now, as the sweep would have (traceTakenOver), read and locked before the
// claims overwrite them.
func (db *DB) forensicsBefore(ctx context.Context, tx pgx.Tx, ask []*recordRow) error {
	return traceTakenOver(ctx, tx, ask)
}

// forensicsAfter runs, in a claim's transaction, once every row is claimed and
// inserted: money mismatches, business keys, late duplicates and correlations, which
// may flag a row (suspects) or block it (a duplicate instead).
func (db *DB) forensicsAfter(ctx context.Context, tx pgx.Tx, rows []*recordRow) error {
	return checkRows(ctx, tx, rows)
}
