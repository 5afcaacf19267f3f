package postgres

// Not built yet on PostgreSQL: each of these is replaced by its engine code.

import (
	"context"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func (db *DB) CreateBulkPreview(ctx context.Context, req storage.BulkRequest) (_ storage.BulkAction, err error) {
	err = errNotBuilt
	return
}

func (db *DB) BulkAction(ctx context.Context, id int64) (_ storage.BulkAction, err error) {
	err = errNotBuilt
	return
}

func (db *DB) BulkActions(ctx context.Context, state string, limit int) (_ []storage.BulkAction, err error) {
	err = errNotBuilt
	return
}

func (db *DB) BulkKeys(ctx context.Context, id int64, limit int) (_ []storage.BulkKey, err error) {
	err = errNotBuilt
	return
}

func (db *DB) BulkSample(ctx context.Context, id int64) (_ []storage.BulkKey, err error) {
	err = errNotBuilt
	return
}

func (db *DB) StartBulkAction(ctx context.Context, id int64, actor string, t storage.ApprovalThresholds) (_ storage.BulkAction, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ApproveBulkAction(ctx context.Context, id int64, actor, reason string) (_ storage.BulkAction, err error) {
	err = errNotBuilt
	return
}

func (db *DB) RefuseBulkAction(ctx context.Context, id int64, actor, reason string) (_ storage.BulkAction, err error) {
	err = errNotBuilt
	return
}

func (db *DB) CancelBulkAction(ctx context.Context, id int64, actor, reason string) (_ storage.BulkAction, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ClaimBulkAction(ctx context.Context, runner string, lease time.Duration) (_ int64, _ bool, err error) {
	err = errNotBuilt
	return
}

func (db *DB) RunBulkBatch(ctx context.Context, id int64, runner string, stuckBefore time.Time, n int, lease time.Duration) (_ storage.BulkBatch, err error) {
	err = errNotBuilt
	return
}

func (db *DB) RunBulkActions(ctx context.Context, cfg storage.BulkRunConfig) {
	<-ctx.Done()
}
