package postgres

// Not built yet on PostgreSQL: each of these is replaced by its engine code.

import (
	"context"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func (db *DB) SweepExpired(ctx context.Context, now time.Time, limit int) (_ int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SweepDeliveries(ctx context.Context, now, cutoff time.Time, from storage.SweepCursor, limit int) (_ int64, _ storage.SweepCursor, err error) {
	err = errNotBuilt
	return
}
