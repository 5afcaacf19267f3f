package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/hookdedup/hookdedup/storage"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// writeTx runs fn in one transaction on the write connection and commits it. Every
// write but intake's (record.go batches its own) goes through here, so that two
// promises hold for all of them:
//
//   - Nothing is reported stored that went into a file no longer at the database's
//     path: the file is looked for before the transaction (nothing is written then) and
//     after its commit (the commit went into a file nobody will open again). Either
//     time the error wraps ErrFileGone.
//   - The wait is bounded by the busy timeout from the call, in all: the wait for the
//     write connection (intake's writer, the dispatcher, the sweeps and the console
//     share it) and SQLite's wait for the write lock (another process's) together. A
//     caller queued behind others' busy waits is told ErrWriteTimeout then, not after
//     several busy timeouts end to end. An earlier deadline of ctx bounds it too.
//
// An error of fn is returned as it is, after a rollback; fn may set its caller's
// variables, which are then to be used only when writeTx returns nil.
func (db *DB) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := db.checkFile(); err != nil {
		return err
	}
	deadline := time.Now().Add(db.busyTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn, err := db.writeConn(ctx, deadline)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := db.begin(ctx, conn, deadline)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return busyAsTimeout(err)
	}
	if err := tx.Commit(); err != nil {
		return busyAsTimeout(fmt.Errorf("commit: %w", err))
	}
	return db.checkFile()
}

// writeConn waits until deadline at most for the write connection.
func (db *DB) writeConn(ctx context.Context, deadline time.Time) (*sql.Conn, error) {
	select {
	case <-db.closing:
		return nil, storage.ErrClosed
	default:
	}
	wait, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := db.write.Conn(wait)
	switch {
	case err == nil:
		return conn, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case wait.Err() != nil:
		return nil, fmt.Errorf("wait for the write connection: %w", storage.ErrWriteTimeout)
	}
	return nil, err
}

// begin starts a write transaction on conn, waiting for SQLite's write lock until
// deadline at most: the connection's busy timeout is set to what is left of the wait for
// the BEGIN, and back to the whole one once the lock is held (so that no statement of
// the transaction fails for a lock it no longer needs to wait for).
func (db *DB) begin(ctx context.Context, conn *sql.Conn, deadline time.Time) (*sql.Tx, error) {
	left := time.Until(deadline)
	if left <= 0 {
		return nil, fmt.Errorf("wait for the write connection: %w", storage.ErrWriteTimeout)
	}
	// A context without Done takes go-sqlite3's path of one cgo call, no goroutine.
	if err := setBusyTimeout(context.Background(), conn, left); err != nil {
		return nil, discard(conn, err)
	}
	tx, beginErr := conn.BeginTx(ctx, nil)
	if beginErr != nil {
		if err := setBusyTimeout(context.Background(), conn, db.busyTimeout); err != nil {
			return nil, discard(conn, errors.Join(beginErr, err))
		}
		return nil, busyAsTimeout(fmt.Errorf("begin: %w", beginErr))
	}
	if err := setBusyTimeout(context.Background(), tx, db.busyTimeout); err != nil {
		tx.Rollback()
		return nil, discard(conn, err)
	}
	return tx, nil
}

// setBusyTimeout sets the busy timeout of the connection x runs on; at least a
// millisecond, as 0 would turn the busy wait off.
func setBusyTimeout(ctx context.Context, x execer, d time.Duration) error {
	_, err := x.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", max(d.Milliseconds(), 1)))
	if err != nil {
		return fmt.Errorf("set busy timeout: %w", err)
	}
	return nil
}

// discard makes the pool close conn instead of reusing it, for a connection left with
// a busy timeout other than the DSN's; it returns err.
func discard(conn *sql.Conn, err error) error {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	return err
}

// busyAsTimeout wraps ErrWriteTimeout around err when err is SQLite's busy error (the
// write lock stayed held by another connection past the wait), and ErrCannotStore when
// the database refused the write for a full disk or a read-only file: either way
// nothing of it is stored, and it may pass later.
func busyAsTimeout(err error) error {
	var se sqlite3.Error
	switch {
	case errors.As(err, &se) && se.Code == sqlite3.ErrBusy:
		return fmt.Errorf("%w: %w", storage.ErrWriteTimeout, err)
	case errors.As(err, &se) && se.Code == sqlite3.ErrReadonly, diskFull(err):
		return fmt.Errorf("%w: %w", storage.ErrCannotStore, err)
	}
	return err
}

// writeExec runs one statement through writeTx and returns its result.
func (db *DB) writeExec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = tx.ExecContext(ctx, query, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
