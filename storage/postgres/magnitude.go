package postgres

import (
	"context"

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
	type dayKey struct {
		day                              int64
		source, property, currency, kind string
	}
	type hourKey struct {
		source, currency string
		hour             int64
	}
	days, totals, hours := map[dayKey]int64{}, map[dayKey]int64{}, map[hourKey]float64{}
	var id, at int64
	var source, property, currency, amount string
	var mm bool
	_, err = pgx.ForEachRow(rows, []any{&id, &at, &source, &property, &currency, &amount, &mm}, func() error {
		minor, minorOK, real, realOK := storage.SignedFix(amount, currency)
		if minorOK && id <= ledgerMark {
			kinds := []string{storage.LedgerCaught}
			if mm {
				kinds = append(kinds, storage.LedgerMoneyMismatch)
			}
			for _, kind := range kinds {
				days[dayKey{at / dayMillis, source, property, currency, kind}] += minor
				totals[dayKey{at / dayMillis, source, "", currency, kind}] += minor
			}
		}
		if realOK && id <= statsMark {
			hours[hourKey{source, currency, at / 3600000}] += real
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A sum no int64 holds is left as it was, as a roll-up leaves it (sqlLedgerAdd).
	const fits = ` AND amount::numeric + $1 BETWEEN -9223372036854775808 AND 9223372036854775807`
	for k, n := range days {
		if _, err := tx.Exec(ctx, `UPDATE ledger_days SET amount = amount + $1
WHERE day = $2 AND source = $3 AND property = $4 AND currency = $5 AND kind = $6`+fits,
			n, k.day, k.source, k.property, k.currency, k.kind); err != nil {
			return err
		}
	}
	for k, n := range totals {
		if _, err := tx.Exec(ctx, `UPDATE ledger_totals SET amount = amount + $1
WHERE day = $2 AND source = $3 AND currency = $4 AND kind = $5`+fits, n, k.day, k.source, k.currency, k.kind); err != nil {
			return err
		}
	}
	for k, v := range hours {
		if _, err := tx.Exec(ctx, `UPDATE delivery_stats SET amount = amount + $1
WHERE source = $2 AND hour = $3 AND outcome = '`+string(storage.Duplicate)+`' AND currency = $4`, v, k.source, k.hour, k.currency); err != nil {
			return err
		}
	}
	return nil
}
