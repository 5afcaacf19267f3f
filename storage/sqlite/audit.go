package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// auditColumns are the columns scanned by scanAudit, in its order.
const auditColumns = `id, at, actor, action, source, key, reason, previous_state, hash`

// scanAudit reads one row of auditColumns. The time is taken as stored, 0 included,
// so that the row's hash can be recomputed from what it returns. A time stored as
// anything but an integer (the column takes text or a fraction from whoever edits the
// file) was not written by insertAudit: the row is read with the zero time, which no
// hash was made over, so that a check finds the row edited rather than failing to
// read it, and the console still lists the log.
func scanAudit(s interface{ Scan(...any) error }) (storage.AuditEntry, error) {
	var e storage.AuditEntry
	var at any
	err := s.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Source, &e.Key, &e.Reason, &e.PreviousState, &e.Hash)
	if ms, ok := at.(int64); ok {
		e.At = time.UnixMilli(ms).UTC()
	}
	return e, err
}

// AuditLog returns audit rows newest first, those with id below before (0 = from the newest).
func (db *DB) AuditLog(ctx context.Context, before int64, limit int) ([]storage.AuditEntry, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := db.read.QueryContext(ctx, `SELECT `+auditColumns+`
		FROM audit_log WHERE id < ? ORDER BY id DESC LIMIT ?`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	var out []storage.AuditEntry
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// AuditRows calls fn with every row of the audit log, oldest first, all read in one
// snapshot (rows appended meanwhile are not included). It stops at fn's first error and
// returns it.
func (db *DB) AuditRows(ctx context.Context, fn func(storage.AuditEntry) error) error {
	return auditRows(ctx, db.read, fn)
}

func auditRows(ctx context.Context, q queryer, fn func(storage.AuditEntry) error) error {
	rows, err := q.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit_log ORDER BY id`)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// AppendAudit writes one audit row in a transaction of its own (At, when zero, is now):
// for an action that changes nothing in the database, such as a revealed secret.
func (db *DB) AppendAudit(ctx context.Context, e storage.AuditEntry) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error { return db.insertAudit(ctx, tx, e) })
}

// execer is a connection or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertAudit appends e to the audit log inside tx, the write transaction of the change
// it records (writeTx's), so that the change and its row commit together
// or not at all. It is the only writer of audit rows: a new audited action calls it with
// the entry filled in (Actor, Action and what applies of Source, Key, Reason,
// PreviousState; At is now when zero; ID and Hash are ignored).
//
// The row gets the next id and its link in the chain (auditchain.go): the hash over the
// newest row's hash and the row's own content. The chain cannot fork. tx holds SQLite's
// write lock from its BEGIN (IMMEDIATE, in the DSN), so no other writer, in this process
// or another, can commit a row between the read of the newest row here and this row's
// insert: the next writer reads this row as the newest once it commits, and the order of
// the chain is the commit order. Were a transaction ever begun DEFERRED, WAL would refuse
// its write after another's commit (SQLITE_BUSY_SNAPSHOT), and the explicit id would
// collide on the primary key rather than fork.
//
// Text is stored as valid UTF-8 (an invalid byte becomes U+FFFD), so that the JSON
// export holds exactly the bytes that were hashed.
func (db *DB) insertAudit(ctx context.Context, tx *sql.Tx, e storage.AuditEntry) error {
	if e.At.IsZero() {
		e.At = db.Now()
	}
	// As both engines keep free text (storage.ReplacedText), so that a row hashes
	// alike on both and migrate can copy it: a NUL, which PostgreSQL text cannot hold,
	// and bytes that are not UTF-8 become U+FFFD.
	for _, s := range []*string{&e.Actor, &e.Action, &e.Source, &e.Key, &e.Reason, &e.PreviousState} {
		*s = storage.ReplacedText(*s)
	}
	prev := storage.AuditGenesis
	err := tx.QueryRowContext(ctx, `SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1`).Scan(&e.ID, &prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	e.ID++
	e.Hash = storage.AuditHash(prev, e)
	_, err = tx.ExecContext(ctx, `INSERT INTO audit_log (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.At.UnixMilli(), e.Actor, e.Action, e.Source, e.Key, e.Reason, e.PreviousState, e.Hash)
	if err != nil {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	return nil
}
