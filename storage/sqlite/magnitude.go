package sqlite

import (
	"context"
	"database/sql"

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
	type totalKey struct {
		day                    int64
		source, currency, kind string
	}
	days, totals, hours := map[ledgerKey]int64{}, map[totalKey]int64{}, map[statsKey]float64{}
	for rows.Next() {
		var id, at int64
		var source, property, currency, amount string
		var mm bool
		if err := rows.Scan(&id, &at, &source, &property, &currency, &amount, &mm); err != nil {
			return err
		}
		minor, minorOK, real, realOK := storage.SignedFix(amount, currency)
		if minorOK && id <= ledgerMark {
			kinds := []string{storage.LedgerCaught}
			if mm {
				kinds = append(kinds, storage.LedgerMoneyMismatch)
			}
			for _, kind := range kinds {
				days[ledgerKey{at / dayMillis, source, property, currency, kind}] += minor
				totals[totalKey{at / dayMillis, source, currency, kind}] += minor
			}
		}
		if realOK && id <= statsMark {
			hours[statsKey{source: source, outcome: string(storage.Duplicate), currency: currency, hour: at / 3600000}] += real
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// A sum no int64 holds is left as it was, as a roll-up leaves it (sqlLedgerAddAmount).
	for k, n := range days {
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_days SET amount = amount + ?1
WHERE day = ?2 AND source = ?3 AND property = ?4 AND currency = ?5 AND kind = ?6 AND typeof(amount + ?1) = 'integer'`,
			n, k.day, k.source, k.property, k.curr, k.kind); err != nil {
			return err
		}
	}
	for k, n := range totals {
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_totals SET amount = amount + ?1
WHERE day = ?2 AND source = ?3 AND currency = ?4 AND kind = ?5 AND typeof(amount + ?1) = 'integer'`,
			n, k.day, k.source, k.currency, k.kind); err != nil {
			return err
		}
	}
	for k, v := range hours {
		if _, err := tx.ExecContext(ctx, `UPDATE delivery_stats SET amount = amount + ?
WHERE source = ? AND hour = ? AND outcome = ? AND currency = ?`, v, k.source, k.hour, k.outcome, k.currency); err != nil {
			return err
		}
	}
	return nil
}
