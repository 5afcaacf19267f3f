package postgres

// Not built yet on PostgreSQL: each of these is replaced by its engine code.

import (
	"context"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func (db *DB) SweepTraces(ctx context.Context, cutoff time.Time, limit int) (_ int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SweepBusinessKeys(ctx context.Context, cutoff time.Time, limit int) (_ int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SweepCorrelationKeys(ctx context.Context, cutoff time.Time, limit int) (_ int64, err error) {
	err = errNotBuilt
	return
}

func (db *DB) WouldFlag(ctx context.Context, p storage.Probe) (_ []storage.Suspect, err error) {
	err = errNotBuilt
	return
}

func (db *DB) FlagsOf(ctx context.Context, id int64) (_ storage.DeliveryFlags, err error) {
	err = errNotBuilt
	return
}

func (db *DB) Suspects(ctx context.Context, f storage.SuspectFilter) (_ storage.SuspectPage, err error) {
	err = errNotBuilt
	return
}

func (db *DB) Suspect(ctx context.Context, id int64) (_ storage.Suspect, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SuspectsOf(ctx context.Context, ids []int64) (_ map[int64][]storage.Suspect, err error) {
	err = errNotBuilt
	return
}

func (db *DB) SuspectCounts(ctx context.Context) (_ []storage.SuspectCount, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ReviewSuspect(ctx context.Context, id int64, actor, state, reason string) (_ storage.Suspect, err error) {
	err = errNotBuilt
	return
}
