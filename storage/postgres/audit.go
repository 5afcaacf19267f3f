package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// auditColumns are the audit log's columns, in the order scanAudit reads them.
const auditColumns = `id, at, actor, action, source, key, reason, previous_state, hash`

// lockAudit takes auditLock for tx, until it ends: every writer of the audit log takes
// it first (insertAudit), and so do the releases and the four-eyes count, before the
// rows they decide on.
func (db *DB) lockAudit(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, db.locks.id(auditLock))
	return err
}

// insertAudit appends e to the audit log inside tx, chained after the newest row
// (storage.AuditHash). Every writer takes auditLock for its transaction first, so that
// no other transaction, on this replica or another, can commit a row between the read
// of the newest row here and this row's insert: the next writer waits for this commit
// and then reads this row as the newest. The chain cannot fork, and its order is the
// commit order. A writer that bypassed the lock would collide on the primary key, not
// fork the chain.
//
// Text is stored as valid UTF-8 (an invalid byte becomes U+FFFD), so that the JSON
// export holds exactly the bytes that were hashed; PostgreSQL refuses invalid UTF-8
// anyway.
func (db *DB) insertAudit(ctx context.Context, tx pgx.Tx, e storage.AuditEntry) error {
	if e.At.IsZero() {
		e.At = db.Now()
	}
	for _, s := range []*string{&e.Actor, &e.Action, &e.Source, &e.Key, &e.Reason, &e.PreviousState} {
		*s = storage.ReplacedText(*s)
	}
	if err := db.lockAudit(ctx, tx); err != nil {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	prev := storage.AuditGenesis
	err := tx.QueryRow(ctx, `SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1`).Scan(&e.ID, &prev)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	e.ID++
	e.Hash = storage.AuditHash(prev, e)
	_, err = tx.Exec(ctx, `INSERT INTO audit_log (`+auditColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		e.ID, millis(e.At), e.Actor, e.Action, e.Source, e.Key, e.Reason, e.PreviousState, e.Hash)
	if err != nil {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	return nil
}
