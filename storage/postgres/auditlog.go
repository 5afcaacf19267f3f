package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// scanAudit reads one row of auditColumns. The time is taken as stored, 0 included,
// so that the row's hash can be recomputed from what it returns.
func scanAudit(row pgx.Row) (storage.AuditEntry, error) {
	var e storage.AuditEntry
	var at int64
	err := row.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Source, &e.Key, &e.Reason, &e.PreviousState, &e.Hash)
	e.At = time.UnixMilli(at).UTC()
	return e, err
}

// AuditLog returns audit rows newest first, those with id below before (0 = from the newest).
func (db *DB) AuditLog(ctx context.Context, before int64, limit int) ([]storage.AuditEntry, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	var lim *int // a negative limit is none, as in SQLite
	if limit >= 0 {
		lim = &limit
	}
	rows, err := db.pool.Query(ctx, `SELECT `+auditColumns+` FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2`, before, lim)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.AuditEntry, error) { return scanAudit(row) })
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return out, nil
}

// AuditRows calls fn with every row of the audit log, oldest first, all read in one
// snapshot (rows appended meanwhile are not included). It stops at fn's first error and
// returns it.
func (db *DB) AuditRows(ctx context.Context, fn func(storage.AuditEntry) error) error {
	var fnErr error
	err := db.auditSnapshot(ctx, func(tx pgx.Tx) error {
		for e, err := range auditRowsAfter(ctx, tx, storage.AuditStart.After(), -1) {
			if err != nil {
				return err
			}
			if fnErr = fn(e); fnErr != nil {
				return fnErr
			}
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// AppendAudit writes one audit row in a transaction of its own (At, when zero, is now):
// for an action that changes nothing in the database, such as a revealed secret.
func (db *DB) AppendAudit(ctx context.Context, e storage.AuditEntry) error {
	return db.writeTx(ctx, func(tx pgx.Tx) error { return db.insertAudit(ctx, tx, e) })
}

// VerifyAudit checks the whole audit chain, from the genesis, in one read snapshot, and
// that it passes through anchor unless anchor.Hash is empty. A break comes back in the
// AuditCheck, not as an error; the error is for a check that could not be made.
func (db *DB) VerifyAudit(ctx context.Context, anchor storage.AuditAnchor) (storage.AuditCheck, error) {
	var c storage.AuditCheck
	err := db.auditSnapshot(ctx, func(tx pgx.Tx) error {
		var err error
		c, err = storage.CheckAudit(storage.AuditStart, 0, anchor, auditRowsAfter(ctx, tx, storage.AuditStart.After(), -1))
		return err
	})
	if err != nil {
		return storage.AuditCheck{}, fmt.Errorf("verify the audit log: %w", err)
	}
	return c, nil
}

// auditCheckBatch bounds the rows one AuditChain call checks, and so what it adds to a
// console page once per that many new rows, as in the SQLite engine.
const auditCheckBatch = 10000

// AuditChain reports the state of the audit chain for the console, checking only what
// the calls before it have not (storage.AuditMark, each replica its own),
// auditCheckBatch rows at most (More then says rows are left for the next call). A
// change to the rows below the mark that leaves the mark's own hash alone (a row
// edited, its hash kept) shows only to VerifyAudit, or after a restart; the mark's row
// changed or gone shows at once, as a rewritten or cut log, until the chain passes
// through it again.
//
// The mark's row and the rows after it are read in one snapshot, so that the rows
// checked follow the mark's row as it was found.
func (db *DB) AuditChain(ctx context.Context) (storage.AuditCheck, error) {
	var c storage.AuditCheck
	err := db.auditSnapshot(ctx, func(tx pgx.Tx) error {
		var err error
		c, err = db.auditMark.Next(func(id int64) (string, bool, error) {
			var hash string
			err := tx.QueryRow(ctx, `SELECT hash FROM audit_log WHERE id = $1`, id).Scan(&hash)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", false, nil
			}
			return hash, err == nil, err
		}, func(from storage.AuditPos, anchor storage.AuditAnchor) (storage.AuditCheck, error) {
			// The row after the last: for More, and to tell how a break came.
			return storage.CheckAudit(from, auditCheckBatch, anchor, auditRowsAfter(ctx, tx, from.After(), auditCheckBatch+1))
		})
		return err
	})
	if err != nil {
		return storage.AuditCheck{}, fmt.Errorf("audit chain: %w", err)
	}
	return c, nil
}

// auditSnapshot runs fn in a read-only REPEATABLE READ transaction: every statement of
// fn reads the one snapshot taken at its first, whatever other replicas commit
// meanwhile.
func (db *DB) auditSnapshot(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// auditRowsAfter yields the audit rows with an id above after, in id order, limit of
// them at most (negative: all), read by one statement of q, as they come from the
// server.
func auditRowsAfter(ctx context.Context, q querier, after int64, limit int) iter.Seq2[storage.AuditEntry, error] {
	return func(yield func(storage.AuditEntry, error) bool) {
		var lim *int
		if limit >= 0 {
			lim = &limit
		}
		rows, err := q.Query(ctx, `SELECT `+auditColumns+` FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2`, after, lim)
		if err != nil {
			yield(storage.AuditEntry{}, err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanAudit(rows)
			if !yield(e, err) || err != nil {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(storage.AuditEntry{}, err)
		}
	}
}
