package sqlite

import (
	"context"

	"github.com/hookdedup/hookdedup/storage"
)

// RunBulkActions runs bulk actions until ctx ends (storage.RunBulkActions): it is safe
// to run in several processes on one database file.
func (db *DB) RunBulkActions(ctx context.Context, cfg storage.BulkRunConfig) {
	storage.RunBulkActions(ctx, db, cfg, db.bulkWake, db.log)
}
