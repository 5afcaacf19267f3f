package postgres

// Not built yet on PostgreSQL: each of these is replaced by its engine code.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

func (db *DB) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int) (_ []storage.Job, err error) {
	err = errNotBuilt
	return
}

func (db *DB) NextDue(ctx context.Context) (_ time.Time, err error) {
	err = errNotBuilt
	return
}

func (db *DB) FinishAttempt(ctx context.Context, job storage.Job, a storage.Attempt, res storage.AttemptResult) (_ bool, err error) {
	err = errNotBuilt
	return
}

func (db *DB) Attempts(ctx context.Context, source, key string) (_ []storage.Attempt, err error) {
	err = errNotBuilt
	return
}

func (db *DB) LastAttempt(ctx context.Context, source, key string) (_ storage.Attempt, err error) {
	err = errNotBuilt
	return
}

func (db *DB) Keys(ctx context.Context, f storage.KeyFilter) (_ storage.KeyPage, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ListKeys(ctx context.Context, f storage.KeyFilter) (_ []storage.Claim, err error) {
	err = errNotBuilt
	return
}

func (db *DB) StuckCounts(ctx context.Context, stuckBefore time.Time) (_ map[string]int, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ReleaseKey(ctx context.Context, r storage.Release) (_ storage.Released, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ReleaseKeys(ctx context.Context, f storage.KeyFilter, r storage.Release) (_ []storage.KeyOutcome, err error) {
	err = errNotBuilt
	return
}

func (db *DB) ReleaseEach(ctx context.Context, keys []storage.KeyRef, r storage.Release) (_ []storage.KeyOutcome, err error) {
	err = errNotBuilt
	return
}

// releaseIn releases (or reprocesses) one key inside tx, as the SQLite engine's does:
// a refusal (no such key, a key in flight, a reprocess without a payload) comes back as
// refused, wrapping ErrNotFound, ErrBusy or ErrPayloadGone, with nothing written; err
// means the transaction failed. The bulk runner calls it too.
func (db *DB) releaseIn(ctx context.Context, tx pgx.Tx, r storage.Release) (out storage.Released, refused, err error) {
	err = errNotBuilt
	return
}
