package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID            int64
	At            time.Time
	Actor, Action string
	Source, Key   string
	Reason        string
	PreviousState string
}

// AuditLog returns audit rows newest first, those with id below before (0 = from the newest).
func (db *DB) AuditLog(ctx context.Context, before int64, limit int) ([]AuditEntry, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := db.read.QueryContext(ctx, `SELECT id, at, actor, action, source, key, reason, previous_state
		FROM audit_log WHERE id < ? ORDER BY id DESC LIMIT ?`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Source, &e.Key, &e.Reason, &e.PreviousState); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		e.At = fromMillis(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// AppendAudit writes one audit row (At, when zero, is now).
func (db *DB) AppendAudit(ctx context.Context, e AuditEntry) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error { return db.insertAudit(ctx, tx, e) })
}

// execer is a connection or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertAudit writes one audit row through x: the transaction of the change it
// records, so that the change and its row commit together, or one of its own.
func (db *DB) insertAudit(ctx context.Context, x execer, e AuditEntry) error {
	if e.At.IsZero() {
		e.At = db.Now()
	}
	_, err := x.ExecContext(ctx, `INSERT INTO audit_log (at, actor, action, source, key, reason, previous_state)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, millis(e.At), e.Actor, e.Action, e.Source, e.Key, e.Reason, e.PreviousState)
	if err != nil {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	return nil
}
