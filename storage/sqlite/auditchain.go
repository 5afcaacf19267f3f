package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/hookdedup/hookdedup/storage"
)

// chainAuditLog gives every row already in the audit log its hash, in id order from
// the genesis. It runs once, in the transaction of the migration that adds the column,
// so rows written before the chain existed join it; a row found later without a hash
// was not written by insertAudit, and verification says so.
func chainAuditLog(ctx context.Context, tx *sql.Tx) error {
	prev, after := storage.AuditGenesis, int64(math.MinInt64)
	for {
		// In batches: the statement reading rows is closed before the updates.
		rows, err := tx.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit_log WHERE id > ? ORDER BY id LIMIT 500`, after)
		if err != nil {
			return fmt.Errorf("chain the audit log: %w", err)
		}
		var batch []storage.AuditEntry
		for rows.Next() {
			e, err := scanAudit(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("chain the audit log: %w", err)
			}
			batch = append(batch, e)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("chain the audit log: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		for _, e := range batch {
			prev = storage.AuditHash(prev, e)
			if _, err := tx.ExecContext(ctx, `UPDATE audit_log SET hash = ? WHERE id = ?`, prev, e.ID); err != nil {
				return fmt.Errorf("chain the audit log: row %d: %w", e.ID, err)
			}
		}
		after = batch[len(batch)-1].ID
	}
}

// VerifyAudit checks the whole audit chain, from the genesis, in one read snapshot, and
// that it passes through anchor unless anchor.Hash is empty. A break comes back in the
// AuditCheck, not as an error; the error is for a check that could not be made.
func (db *DB) VerifyAudit(ctx context.Context, anchor storage.AuditAnchor) (storage.AuditCheck, error) {
	c, err := checkChain(ctx, db.read, storage.AuditStart, 0, anchor)
	if err != nil {
		return storage.AuditCheck{}, fmt.Errorf("verify the audit log: %w", err)
	}
	return c, nil
}

// auditCheckBatch bounds the rows one AuditChain call checks, and so what it adds to a
// page once per that many new rows: 60 to 140 ms on a 2-core machine under heavy load
// (BenchmarkVerifyAudit, about 7 to 14 µs a row, most of it SQLite's). A call with
// nothing new to check costs one lookup, about 50 µs.
const auditCheckBatch = 10000

// AuditChain reports the state of the audit chain for the console, checking only what
// the calls before it have not (storage.AuditMark), auditCheckBatch rows at most (More
// then says rows are left for the next call). A change to the rows below the mark that
// leaves the mark's own hash alone (a row edited, its hash kept) shows only to
// VerifyAudit, or after a restart; the mark's row changed or gone shows at once, as a
// rewritten or cut log, until the chain passes through it again.
func (db *DB) AuditChain(ctx context.Context) (storage.AuditCheck, error) {
	c, err := db.auditMark.Next(func(id int64) (string, bool, error) {
		var hash string
		err := db.read.QueryRowContext(ctx, `SELECT hash FROM audit_log WHERE id = ?`, id).Scan(&hash)
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		}
		return hash, err == nil, err
	}, func(from storage.AuditPos, anchor storage.AuditAnchor) (storage.AuditCheck, error) {
		return checkChain(ctx, db.read, from, auditCheckBatch, anchor)
	})
	if err != nil {
		return storage.AuditCheck{}, fmt.Errorf("audit chain: %w", err)
	}
	return c, nil
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// checkChain checks the rows after from, in id order, with the engines' shared check
// (storage.CheckAudit): at most limit of them (0: all), all read by one statement (one
// snapshot). It checks that the chain passes through anchor, unless anchor.Hash is empty.
func checkChain(ctx context.Context, q queryer, from storage.AuditPos, limit int, anchor storage.AuditAnchor) (storage.AuditCheck, error) {
	sqlLimit := -1
	if limit > 0 {
		sqlLimit = limit + 1 // the row after the last: for More, and to tell how a break came
	}
	return storage.CheckAudit(from, limit, anchor, func(yield func(storage.AuditEntry, error) bool) {
		rows, err := q.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit_log WHERE id > ? ORDER BY id LIMIT ?`, from.After(), sqlLimit)
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
	})
}
