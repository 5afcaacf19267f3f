package sqlite

import (
	"context"
	"database/sql"
)

// WriteTx runs fn in a transaction of the write connection, queued behind the
// writers already waiting for it, as every write of db is.
func (db *DB) WriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.writeTx(ctx, fn)
}
