package postgres

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// countMagnitudes is the step of migration 0027: the ledger's daily totals and the
// dashboard's hourly ones of duplicates, summed with their signs before, count the
// negative amounts of the duplicates still stored by their magnitude. They outlive the
// deliveries that retention sweeps, which no roll-up could count again, so they are
// mended in place rather than emptied: a day or hour whose duplicates were swept keeps
// what it summed. Only duplicates are read (through their index): the hourly amounts of
// other outcomes are shown nowhere.
func countMagnitudes(ctx context.Context, tx pgx.Tx) error {
	var ledgerMark, statsMark int64
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT rolled_up_to FROM ledger_mark WHERE id = 1), 0),
	coalesce((SELECT rolled_up_to FROM delivery_stats_mark WHERE id = 1), 0)`).Scan(&ledgerMark, &statsMark); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `SELECT id, received_at, source, property, currency, amount, money_mismatch
FROM deliveries WHERE `+sqlDuplicates+` AND id <= GREATEST($1::bigint, $2::bigint) AND amount LIKE '-%'`, ledgerMark, statsMark)
	if err != nil {
		return err
	}
	m := storage.NewLedgerMends(ledgerMark, statsMark)
	var id, at int64
	var source, property, currency, amount string
	var mm bool
	_, err = pgx.ForEachRow(rows, []any{&id, &at, &source, &property, &currency, &amount, &mm}, func() error {
		m.Add(id, at, source, property, currency, amount, mm)
		return nil
	})
	if err != nil {
		return err
	}
	for k, mend := range m.Days {
		if err := applyMend(ctx, tx, mend, `ledger_days`, `day = $1 AND source = $2 AND property = $3 AND currency = $4 AND kind = $5`,
			k.Day, k.Source, k.Property, k.Currency, k.Kind); err != nil {
			return err
		}
	}
	for k, mend := range m.Totals {
		if err := applyMend(ctx, tx, mend, `ledger_totals`, `day = $1 AND source = $2 AND currency = $3 AND kind = $4`,
			k.Day, k.Source, k.Currency, k.Kind); err != nil {
			return err
		}
	}
	for k, v := range m.Hours {
		if _, err := tx.Exec(ctx, `UPDATE delivery_stats SET amount = amount + $1
WHERE source = $2 AND hour = $3 AND outcome = '`+string(storage.Duplicate)+`' AND currency = $4`, v, k.Source, k.Hour, k.Currency); err != nil {
			return err
		}
	}
	return nil
}

// applyMend counts the negative amounts m of the daily total of table where (the
// columns of its key, args as $1…) by their magnitude. The row is locked as it is read:
// a roll-up of a replica not stopped yet may be adding to it.
func applyMend(ctx context.Context, tx pgx.Tx, m *storage.LedgerMend, table, where string, args ...any) error {
	var amount, unsummed, withAmount int64
	err := tx.QueryRow(ctx, `SELECT amount, unsummed, deliveries - no_amount FROM `+table+` WHERE `+where+` FOR UPDATE`, args...).
		Scan(&amount, &unsummed, &withAmount)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	amount, unsummed = m.Apply(amount, unsummed, withAmount)
	n := len(args)
	_, err = tx.Exec(ctx, `UPDATE `+table+` SET amount = $`+strconv.Itoa(n+1)+`, unsummed = $`+strconv.Itoa(n+2)+` WHERE `+where,
		append(args, amount, unsummed)...)
	return err
}
