package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// ReprocessedBy is the money actor reprocessed without approval within
// storage.ReprocessWindow, per currency (migration 0025).
func (db *DB) ReprocessedBy(ctx context.Context, actor string) ([]storage.MoneyTotal, error) {
	return reprocessedBy(ctx, db.read, actor, db.Now())
}

func reprocessedBy(ctx context.Context, q queryer, actor string, now time.Time) ([]storage.MoneyTotal, error) {
	rows, err := q.QueryContext(ctx, `SELECT currency, amount FROM reprocessed WHERE actor = ? AND at > ?`,
		actor, millis(now.Add(-storage.ReprocessWindow)))
	if err != nil {
		return nil, fmt.Errorf("money reprocessed by %s: %w", actor, err)
	}
	defer rows.Close()
	var keys []storage.BulkKey
	for rows.Next() {
		var k storage.BulkKey
		if err := rows.Scan(&k.Currency, &k.Amount); err != nil {
			return nil, fmt.Errorf("money reprocessed by %s: %w", actor, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("money reprocessed by %s: %w", actor, err)
	}
	money, _, _ := storage.SumMoney(keys)
	return money, nil
}

// fourEyes compares money, a reprocess by actor at now (unreadable of its amounts not
// read), with t together with what actor reprocessed without approval within
// storage.ReprocessWindow, and returns a line for each currency over t
// (ApprovalThresholds.OverWith). When none is, it counts money as reprocessed by actor.
// It reads and counts inside tx, whose write lock makes the check and the count one
// step: two reprocesses of one operator at once cannot each pass on what the other has
// not counted yet.
func fourEyes(ctx context.Context, tx *sql.Tx, actor string, now time.Time, t storage.ApprovalThresholds,
	money []storage.MoneyTotal, unreadable int) ([]string, error) {
	earlier, err := reprocessedBy(ctx, tx, actor, now)
	if err != nil {
		return nil, err
	}
	if over := t.OverWith(money, earlier, unreadable); len(over) > 0 {
		return over, nil
	}
	return nil, noteReprocessed(ctx, tx, actor, now, money)
}

// noteReprocessed counts money (each currency's gross), a reprocess's under the
// thresholds, towards actor's next reprocess, inside the reprocess's transaction.
// Rows past the window go meanwhile: the table holds a day.
func noteReprocessed(ctx context.Context, tx *sql.Tx, actor string, now time.Time, money []storage.MoneyTotal) error {
	if err := forgetReprocessed(ctx, tx, now); err != nil {
		return err
	}
	for _, m := range money {
		if _, err := tx.ExecContext(ctx, `INSERT INTO reprocessed (actor, at, currency, amount) VALUES (?, ?, ?, ?)`,
			actor, millis(now), m.Currency, m.Gross); err != nil {
			return err
		}
	}
	return nil
}

func forgetReprocessed(ctx context.Context, tx *sql.Tx, now time.Time) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM reprocessed WHERE at <= ?`, millis(now.Add(-storage.ReprocessWindow)))
	return err
}
