package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// ReprocessedBy is the money actor reprocessed without approval within
// storage.ReprocessWindow, per currency (migration 0013).
func (db *DB) ReprocessedBy(ctx context.Context, actor string) ([]storage.MoneyTotal, error) {
	return reprocessedBy(ctx, db.pool, actor, db.Now())
}

func reprocessedBy(ctx context.Context, q querier, actor string, now time.Time) ([]storage.MoneyTotal, error) {
	rows, err := q.Query(ctx, `SELECT currency, amount FROM reprocessed WHERE actor = $1 AND at > $2`,
		storage.ReplacedText(actor), millis(now.Add(-storage.ReprocessWindow)))
	if err != nil {
		return nil, fmt.Errorf("money reprocessed by %s: %w", actor, err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.BulkKey, error) {
		var k storage.BulkKey
		err := row.Scan(&k.Currency, &k.Amount)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("money reprocessed by %s: %w", actor, err)
	}
	money, _, _ := storage.SumMoney(keys)
	return money, nil
}

// fourEyes compares money, a reprocess by actor at now (unreadable of its amounts not
// read), with t together with what actor reprocessed without approval within
// storage.ReprocessWindow, and returns a line for each currency over t
// (ApprovalThresholds.OverWith). When none is, it counts money as reprocessed by actor.
// It reads and counts inside tx holding the audit lock, which every release takes
// first (releaseIn), until tx ends: the check and the count are one step, so that two
// reprocesses of one operator at once, on any replicas, cannot each pass on what the
// other has not counted yet.
func (db *DB) fourEyes(ctx context.Context, tx pgx.Tx, actor string, now time.Time, t storage.ApprovalThresholds,
	money []storage.MoneyTotal, unreadable int) ([]string, error) {
	if err := db.lockAudit(ctx, tx); err != nil {
		return nil, err
	}
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
func noteReprocessed(ctx context.Context, tx pgx.Tx, actor string, now time.Time, money []storage.MoneyTotal) error {
	if err := forgetReprocessed(ctx, tx, now); err != nil {
		return err
	}
	for _, m := range money {
		if _, err := tx.Exec(ctx, `INSERT INTO reprocessed (actor, at, currency, amount) VALUES ($1, $2, $3, $4)`,
			storage.ReplacedText(actor), millis(now), m.Currency, m.Gross); err != nil {
			return err
		}
	}
	return nil
}

func forgetReprocessed(ctx context.Context, tx pgx.Tx, now time.Time) error {
	_, err := tx.Exec(ctx, `DELETE FROM reprocessed WHERE at <= $1`, millis(now.Add(-storage.ReprocessWindow)))
	return err
}
