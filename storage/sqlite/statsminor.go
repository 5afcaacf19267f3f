package sqlite

import (
	"context"
	"database/sql"

	"github.com/hookdedup/hookdedup/storage"
)

// countStatsMinor is the step of migration 0040: the hourly totals' float sums become
// exact sums in minor units. The hours of duplicates, the dashboard's money caught,
// whose deliveries are all still stored are counted again from them, exactly, as the
// ledger counts them; the other hours (swept by retention: the totals outlive the
// deliveries, and no roll-up could count them again) keep what they summed, rounded to
// the currency's minor unit (storage.StatsMinorFromReal).
func countStatsMinor(ctx context.Context, tx *sql.Tx) error {
	if err := convertStatsReal(ctx, tx); err != nil {
		return err
	}
	var mark int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT rolled_up_to FROM delivery_stats_mark), 0)`).Scan(&mark); err != nil {
		return err
	}
	// Through the index of duplicates, as the roll-ups read them.
	rows, err := tx.QueryContext(ctx, `SELECT source, received_at / 3600000, currency, amount
FROM deliveries WHERE outcome = 'duplicate' AND outcome != 'accepted' AND id <= ? AND amount != ''`, mark)
	if err != nil {
		return err
	}
	defer rows.Close()
	hours := storage.StatsHours{}
	for rows.Next() {
		var k storage.StatsHourKey
		var amount string
		if err := rows.Scan(&k.Source, &k.Hour, &k.Currency, &amount); err != nil {
			return err
		}
		hours.Add(k, amount)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k, m := range hours {
		// Only where every amount the hour counted is still stored: with_amount says how
		// many it counted, and a stored duplicate up to the mark is one of them.
		if _, err := tx.ExecContext(ctx, `UPDATE delivery_stats SET amount_minor = ?, unsummed = ?
WHERE source = ? AND hour = ? AND outcome = ? AND currency = ? AND with_amount = ?`,
			m.Minor, m.Unsummed, k.Source, k.Hour, storage.Duplicate, k.Currency, m.Count); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `ALTER TABLE delivery_stats DROP COLUMN amount`)
	return err
}

// convertStatsReal writes every hourly total's float sum (amount) in minor units of
// its currency (amount_minor), as storage.StatsMinorFromReal converts it.
func convertStatsReal(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT source, hour, outcome, currency, amount, with_amount, unsummed
FROM delivery_stats WHERE amount != 0`)
	if err != nil {
		return err
	}
	type total struct {
		source, outcome, currency string
		hour, minor, unsummed     int64
	}
	var totals []total
	for rows.Next() {
		var t total
		var real float64
		var withAmount int64
		if err := rows.Scan(&t.source, &t.hour, &t.outcome, &t.currency, &real, &withAmount, &t.unsummed); err != nil {
			rows.Close()
			return err
		}
		t.minor, t.unsummed = storage.StatsMinorFromReal(real, t.currency, withAmount, t.unsummed)
		totals = append(totals, t)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range totals {
		if _, err := tx.ExecContext(ctx, `UPDATE delivery_stats SET amount_minor = ?, unsummed = ?
WHERE source = ? AND hour = ? AND outcome = ? AND currency = ?`, t.minor, t.unsummed, t.source, t.hour, t.outcome, t.currency); err != nil {
			return err
		}
	}
	return nil
}
