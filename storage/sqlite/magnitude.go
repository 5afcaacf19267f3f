package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/hookdedup/hookdedup/storage"
)

// countMagnitudes is the step of migration 0039: the ledger's daily totals and the
// dashboard's hourly ones of duplicates, summed with their signs before, count the
// negative amounts of the duplicates still stored by their magnitude. They outlive the
// deliveries that retention sweeps, which no roll-up could count again, so they are
// mended in place rather than emptied: a day or hour whose duplicates were swept keeps
// what it summed. Only duplicates are read (through their index): the hourly amounts of
// other outcomes are shown nowhere.
func countMagnitudes(ctx context.Context, tx *sql.Tx) error {
	var ledgerMark, statsMark int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT rolled_up_to FROM ledger_mark), 0),
	coalesce((SELECT rolled_up_to FROM delivery_stats_mark), 0)`).Scan(&ledgerMark, &statsMark); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, received_at, source, property, currency, amount, money_mismatch
FROM deliveries WHERE outcome = 'duplicate' AND outcome != 'accepted' AND id <= max(?1, ?2) AND amount LIKE '-%'`,
		ledgerMark, statsMark)
	if err != nil {
		return err
	}
	defer rows.Close()
	m := storage.NewLedgerMends(ledgerMark, statsMark)
	for rows.Next() {
		var id, at int64
		var source, property, currency, amount string
		var mm bool
		if err := rows.Scan(&id, &at, &source, &property, &currency, &amount, &mm); err != nil {
			return err
		}
		m.Add(id, at, source, property, currency, amount, mm)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k, mend := range m.Days {
		if err := applyMend(ctx, tx, mend, `ledger_days`, `day = ? AND source = ? AND property = ? AND currency = ? AND kind = ?`,
			k.Day, k.Source, k.Property, k.Currency, k.Kind); err != nil {
			return err
		}
	}
	for k, mend := range m.Totals {
		if err := applyMend(ctx, tx, mend, `ledger_totals`, `day = ? AND source = ? AND currency = ? AND kind = ?`,
			k.Day, k.Source, k.Currency, k.Kind); err != nil {
			return err
		}
	}
	for k, v := range m.Hours {
		if _, err := tx.ExecContext(ctx, `UPDATE delivery_stats SET amount = amount + ?
WHERE source = ? AND hour = ? AND outcome = ? AND currency = ?`, v, k.Source, k.Hour, storage.Duplicate, k.Currency); err != nil {
			return err
		}
	}
	return nil
}

// applyMend counts the negative amounts m of the daily total of table where (the
// columns of its key, args) by their magnitude.
func applyMend(ctx context.Context, tx *sql.Tx, m *storage.LedgerMend, table, where string, args ...any) error {
	var amount, unsummed, withAmount int64
	err := tx.QueryRowContext(ctx, `SELECT amount, unsummed, deliveries - no_amount FROM `+table+` WHERE `+where, args...).
		Scan(&amount, &unsummed, &withAmount)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	amount, unsummed = m.Apply(amount, unsummed, withAmount)
	_, err = tx.ExecContext(ctx, `UPDATE `+table+` SET amount = ?, unsummed = ? WHERE `+where,
		append([]any{amount, unsummed}, args...)...)
	return err
}
