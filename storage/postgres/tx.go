package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookdedup/hookdedup/storage"
)

// writeTx runs fn in a transaction and commits it, within the busy timeout
// (Options.BusyTimeout) from its call. A transaction that PostgreSQL aborted for a
// serialization failure or a deadlock, which another replica's concurrent write can
// cause and which change nothing, is run again from the start, fn and all: fn must
// leave nothing outside the transaction that a second run would double. A write not
// committed in time returns an error wrapping storage.ErrWriteTimeout.
func (db *DB) writeTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	ctx, cancel := context.WithTimeoutCause(ctx, db.busyTimeout, storage.ErrWriteTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, db.pool, fn)
		if err == nil {
			return nil
		}
		if errors.Is(context.Cause(ctx), storage.ErrWriteTimeout) {
			return fmt.Errorf("%w: %w", storage.ErrWriteTimeout, err)
		}
		if !retryable(err) || attempt == maxAttempts {
			return err
		}
		// Back off a little, more each time, so that two replicas that deadlocked do not
		// meet again at once.
		select {
		case <-time.After(time.Duration(attempt*attempt) * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
	}
}

// maxAttempts bounds the runs of one writeTx that PostgreSQL aborts.
const maxAttempts = 8

// retryable reports whether err is PostgreSQL's abort of a transaction that may succeed
// when run again: a serialization failure or a deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY constraint refusing
// a row.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// querier is what a read needs: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Times are stored as unix milliseconds, as the SQLite engine stores them, from the
// engine's clock (DB.Now), never the server's: every replica's writes and every test's
// moved clock agree.
func millis(t time.Time) int64 { return t.UnixMilli() }

// fromMillis is the time a column holds; 0 is the zero time (never).
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// nullMillis maps an absent time to SQL NULL.
func nullMillis(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}
