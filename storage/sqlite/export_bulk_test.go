package sqlite

import (
	"context"
	"database/sql"

	"github.com/hookdedup/hookdedup/storage"
)

// WriteTx runs fn in a transaction of the write connection, queued behind the
// writers already waiting for it, as every write of db is.
func (db *DB) WriteTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.writeTx(ctx, fn)
}

// ExplainBulkPreview returns the query plan of the preview of req, one step a line.
func (db *DB) ExplainBulkPreview(ctx context.Context, req storage.BulkRequest) (string, error) {
	query, args := bulkQuery(req)
	return db.explain(ctx, query, args...)
}
