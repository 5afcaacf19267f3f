package postgres

import (
	"context"

	"github.com/hookdedup/hookdedup/storage"
)

// RunBulkActions runs bulk actions until ctx ends (storage.RunBulkActions). Every
// replica runs one; an action started on this replica wakes its runner at once.
func (db *DB) RunBulkActions(ctx context.Context, cfg storage.BulkRunConfig) {
	storage.RunBulkActions(ctx, db, cfg, db.bulkWake, db.log)
}
