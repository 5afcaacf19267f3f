package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookdedup/hookdedup/storage"
)

// writeTx runs fn in a transaction and commits it, within the busy timeout
// (Options.BusyTimeout) from its call. A transaction that PostgreSQL aborted for a
// serialization failure or a deadlock, which another replica's concurrent write can
// cause and which change nothing, is run again from the start, fn and all: fn must
// leave nothing outside the transaction that a second run would double. So is one
// whose connection was lost, or could not be had, before its commit was sent (the
// server restarts, or ended the connection since the pool last used it): nothing of
// it was stored. A
// write not committed in time, or that the server cannot take now and of which
// nothing was stored (no connection to be had, a server turned read-only as a standby
// left behind by a failover is), returns an error wrapping storage.ErrWriteTimeout:
// the caller may try again later.
func (db *DB) writeTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	ctx, cancel := context.WithTimeoutCause(ctx, db.busyTimeout, storage.ErrWriteTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		stored, err := db.runTx(ctx, fn)
		if err == nil {
			return nil
		}
		if errors.Is(context.Cause(ctx), storage.ErrWriteTimeout) {
			return fmt.Errorf("%w: %w", storage.ErrWriteTimeout, err)
		}
		if !stored && readOnlyServer(err) {
			db.leaveReadOnly()
		}
		// A lost connection is tried again until the busy timeout, so that a write
		// outlives a restart of the server shorter than that (a dispatcher's record of
		// an attempt made, say, which would otherwise be made again); an abort, a few
		// times.
		lost := !stored && connectionLost(err)
		if !lost && !(retryable(err) && attempt < maxAttempts) {
			switch {
			case !stored && readOnly(err):
				return fmt.Errorf("%w: %w", storage.ErrCannotStore, err)
			case !stored && lockTimedOut(err):
				return fmt.Errorf("%w: %w", storage.ErrWriteTimeout, err)
			}
			return err
		}
		// Back off a little, more each time, so that two replicas that deadlocked do not
		// meet again at once, and a server starting again is not hammered.
		select {
		case <-time.After(time.Duration(min(attempt*attempt, 250)) * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
	}
}

// runTx is one run of writeTx's transaction. stored is false when the error came
// before the commit was sent, or from the server refusing the commit: nothing of the
// transaction was stored. A commit whose answer was lost may have been stored.
func (db *DB) runTx(ctx context.Context, fn func(tx pgx.Tx) error) (stored bool, err error) {
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: db.beginQuery})
	if err != nil {
		return false, err
	}
	if err := fn(tx); err != nil {
		rctx, cancel := rollbackContext(ctx)
		_ = tx.Rollback(rctx)
		cancel()
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		var pe *pgconn.PgError
		return !errors.As(err, &pe), err
	}
	return true, nil
}

// rollbackTimeout bounds a rollback, which runs after its transaction's context may
// have ended. A server that does not answer one in time (a network that drops packets
// instead of refusing them) has its connection closed, which rolls the transaction
// back as well, and the writer goes on instead of waiting for the kernel to give up on
// the connection, minutes later.
const rollbackTimeout = 5 * time.Second

// rollbackContext is the context of a rollback after ctx's transaction failed: not
// ended with ctx, but bounded by rollbackTimeout.
func rollbackContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
}

// maxAttempts bounds the runs of one writeTx that PostgreSQL aborts.
const maxAttempts = 8

// retryable reports whether err is PostgreSQL's abort of a transaction that may succeed
// when run again: a serialization failure or a deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// connectionLost reports whether err says that the connection could not be had or was
// lost: no connection to the server, a connection the server ended (it shut down,
// restarts, or an administrator ended it), or one that broke.
func connectionLost(err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false // the caller's end, not the connection's
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		pgconn.SafeToRetry(err):
		return true
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return false
}

// beginSQL begins a transaction of writeTx: each lock its statements wait for is
// waited for the busy timeout at most (lock_timeout), as SQLite's busy timeout bounds
// its writers. writeTx's deadline bounds only what it runs itself (BEGIN, COMMIT):
// the statements of fn run under the caller's context, which may have none, and a
// row or lock held by another replica (or by a session left open) would otherwise
// keep the write, and the caller, waiting for as long as it is held. One round trip:
// a simple query may hold several statements.
//
// It is READ COMMITTED whatever the server's default_transaction_isolation says: each
// statement must see what committed before it began, as the advisory locks, FOR UPDATE
// and ON CONFLICT the engine builds on assume. Under repeatable read a transaction's
// snapshot would be taken at its first statement, before the lock it waited for, and
// miss what the lock's last holder committed (the audit log's next id, what an
// operator reprocessed).
func beginSQL(busyTimeout time.Duration) string {
	return fmt.Sprintf("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = %d", max(busyTimeout.Milliseconds(), 1))
}

// lockTimedOut reports whether err is a statement that waited for a lock past
// lock_timeout (beginSQL).
func lockTimedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// readOnly reports whether err is the server refusing a write because it takes none:
// a standby, or a database set read-only.
func readOnly(err error) bool {
	var pe *pgconn.PgError
	// 25006: a standby, or default_transaction_read_only; 53100: the disk is full.
	return errors.As(err, &pe) && (pe.Code == "25006" || pe.Code == "53100")
}

// readOnlyServer reports whether err is a server refusing a write because none may
// be written there at all (25006): a standby, or a primary fenced read-only.
func readOnlyServer(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25006"
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
