package postgres

// Not built yet on PostgreSQL: each of these is replaced by its engine code.

import (
	"context"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func (db *DB) Deliveries(ctx context.Context, f storage.DeliveryFilter) (_ storage.DeliveryPage, err error) {
	err = errNotBuilt
	return
}

func (db *DB) EachDelivery(ctx context.Context, f storage.DeliveryFilter, fn func(storage.Delivery) error) error {
	return errNotBuilt
}

func (db *DB) RecentDuplicates(ctx context.Context, since time.Time, limit int) (_ []storage.Delivery, err error) {
	err = errNotBuilt
	return
}

func (db *DB) Ledger(ctx context.Context, f storage.LedgerFilter) (_ storage.Ledger, err error) {
	err = errNotBuilt
	return
}

func (db *DB) RollupLedger(ctx context.Context, limit int) (_ int, err error) {
	err = errNotBuilt
	return
}

func (db *DB) RollupStats(ctx context.Context, limit int) (_ int, err error) {
	err = errNotBuilt
	return
}

func (db *DB) DeliveryStats(ctx context.Context, from, to time.Time, step time.Duration) (_ []storage.StatBucket, err error) {
	err = errNotBuilt
	return
}
