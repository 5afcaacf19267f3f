package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// countStatsMinor is the step of migration 0028: the hourly totals' float sums become
// exact sums in minor units. The hours of duplicates, the dashboard's money caught,
// whose deliveries are all still stored are counted again from them, exactly, as the
// ledger counts them; the other hours (swept by retention: the totals outlive the
// deliveries, and no roll-up could count them again) keep what they summed, rounded to
// the currency's minor unit (storage.StatsMinorFromReal).
func countStatsMinor(ctx context.Context, tx pgx.Tx) error {
	if err := convertStatsReal(ctx, tx); err != nil {
		return err
	}
	var mark int64
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT rolled_up_to FROM delivery_stats_mark WHERE id = 1), 0)`).Scan(&mark); err != nil {
		return err
	}
	// Through the index of duplicates, as the roll-ups read them.
	rows, err := tx.Query(ctx, `SELECT source, received_at / 3600000, currency, amount
FROM deliveries WHERE `+sqlDuplicates+` AND id <= $1 AND amount <> ''`, mark)
	if err != nil {
		return err
	}
	hours := storage.StatsHours{}
	var k storage.StatsHourKey
	var amount string
	if _, err := pgx.ForEachRow(rows, []any{&k.Source, &k.Hour, &k.Currency, &amount}, func() error {
		hours.Add(k, amount)
		return nil
	}); err != nil {
		return err
	}
	batch := &pgx.Batch{}
	for k, m := range hours {
		// Only where every amount the hour counted is still stored: with_amount says how
		// many it counted, and a stored duplicate up to the mark is one of them.
		batch.Queue(`UPDATE delivery_stats SET amount_minor = $1, unsummed = $2
WHERE source = $3 AND hour = $4 AND outcome = $5 AND currency = $6 AND with_amount = $7`,
			m.Minor, m.Unsummed, k.Source, k.Hour, string(storage.Duplicate), k.Currency, m.Count)
	}
	batch.Queue(`ALTER TABLE delivery_stats DROP COLUMN amount`)
	return tx.SendBatch(ctx, batch).Close()
}

// convertStatsReal writes every hourly total's float sum (amount) in minor units of
// its currency (amount_minor), as storage.StatsMinorFromReal converts it. The
// migration's ALTER TABLE holds the table: no roll-up adds to it meanwhile.
func convertStatsReal(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT source, hour, outcome, currency, amount, with_amount, unsummed
FROM delivery_stats WHERE amount <> 0`)
	if err != nil {
		return err
	}
	batch := &pgx.Batch{}
	var source, outcome, currency string
	var hour, withAmount, unsummed int64
	var real float64
	if _, err := pgx.ForEachRow(rows, []any{&source, &hour, &outcome, &currency, &real, &withAmount, &unsummed}, func() error {
		minor, unsummed := storage.StatsMinorFromReal(real, currency, withAmount, unsummed)
		batch.Queue(`UPDATE delivery_stats SET amount_minor = $1, unsummed = $2
WHERE source = $3 AND hour = $4 AND outcome = $5 AND currency = $6`, minor, unsummed, source, hour, outcome, currency)
		return nil
	}); err != nil {
		return err
	}
	return tx.SendBatch(ctx, batch).Close()
}
