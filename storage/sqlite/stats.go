package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// RollupStats folds up to limit deliveries not yet counted into the hourly totals that
// DeliveryStats reads, and reports how many it folded (fewer than limit: it has caught
// up). It then folds up to limit duplicates into the ledger's daily totals
// (RollupLedger), which keep a mark of their own: a database from before the ledger
// has its past duplicates counted there too, a stretch per call.
func (db *DB) RollupStats(ctx context.Context, limit int) (int, error) {
	n, err := db.rollupStats(ctx, limit)
	if err != nil {
		return n, err
	}
	if _, err := db.RollupLedger(ctx, limit); err != nil {
		return n, err
	}
	return n, nil
}

// rollupStats folds up to limit deliveries not yet counted into the hourly totals that
// DeliveryStats reads, and reports how many it folded (fewer than limit: it has caught
// up). Intake stays free of the work: what the writer kept of the deliveries it stored
// (totals.go) is folded as it is, the rest is counted by reading the deliveries on a
// read connection (on the one write connection it held up intake for as long as it
// took to read thousands of rows, bodies and all), and only the result, a few rows, is
// written. Concurrent calls are safe: the mark moves only from where the counting
// started, so a stretch of deliveries is counted once.
func (db *DB) rollupStats(ctx context.Context, limit int) (int, error) {
	var mark int64
	totals := map[statsKey]*statsSum{}
	sum := func(k statsKey) *statsSum {
		st := totals[k]
		if st == nil {
			st = &statsSum{}
			totals[k] = st
		}
		return st
	}
	read := func(after, upto int64, limit int) (n int, last int64, err error) {
		if upto == noBound {
			upto = math.MaxInt64
		}
		// One statement, so one snapshot: the stretch and its counts.
		rows, err := db.read.QueryContext(ctx, `
WITH stretch AS (SELECT id FROM deliveries WHERE id > ?1 AND id <= ?3 ORDER BY id LIMIT ?2),
     bounds AS (SELECT coalesce(max(id), 0) AS upto, count(*) AS n FROM stretch)
SELECT bounds.upto, bounds.n, `+sqlStatsSource("d")+`, d.received_at / 3600000, d.outcome,
	CASE WHEN d.amount != '' THEN d.currency ELSE '' END, count(d.id),
	coalesce(sum(d.mismatch != 0), 0), coalesce(sum(d.money_mismatch != 0), 0), coalesce(sum(d.amount != ''), 0),
	total(`+sqlAmountReal("d.amount")+`),
	coalesce(sum(d.amount != '' AND NOT `+sqlPlainAmount("d.amount")+`), 0)
FROM bounds LEFT JOIN deliveries d ON d.id > ?1 AND d.id <= bounds.upto
GROUP BY 3, 4, 5, 6`, after, limit, upto)
		if err != nil {
			return 0, 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var st statsSum
			var source, outcome, currency sql.NullString
			var hour sql.NullInt64
			var count int64
			if err := rows.Scan(&last, &count, &source, &hour, &outcome, &currency, &st.deliveries, &st.mismatches,
				&st.moneyMismatches, &st.withAmount, &st.amount, &st.unsummed); err != nil {
				return 0, 0, err
			}
			n = int(count)
			if st.deliveries > 0 {
				t := sum(statsKey{source: source.String, outcome: outcome.String, currency: currency.String, hour: hour.Int64})
				t.add(st)
			}
		}
		return n, last, rows.Err()
	}
	fold := func(s *span) {
		for _, e := range s.stats {
			sum(e.key).add(e.sum)
		}
	}
	var n int
	var upto int64
	err := func() error {
		if err := db.read.QueryRowContext(ctx, `SELECT rolled_up_to FROM delivery_stats_mark`).Scan(&mark); err != nil {
			return err
		}
		var err error
		n, upto, err = db.totals.walk(mark, limit, false, read, fold)
		return err
	}()
	if err != nil {
		return 0, fmt.Errorf("roll up stats: %w", err)
	}
	if n == 0 {
		return 0, nil
	}

	var moved bool
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE delivery_stats_mark SET rolled_up_to = ? WHERE rolled_up_to = ?`, upto, mark)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // another call counted this stretch first
		}
		moved = true
		for k, st := range totals {
			if _, err := tx.ExecContext(ctx, `
INSERT INTO delivery_stats (source, hour, outcome, currency, deliveries, mismatches, money_mismatches, with_amount, amount,
	unsummed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, hour, outcome, currency) DO UPDATE SET
	deliveries  = deliveries + excluded.deliveries,
	mismatches  = mismatches + excluded.mismatches,
	money_mismatches = money_mismatches + excluded.money_mismatches,
	with_amount = with_amount + excluded.with_amount,
	amount      = amount + excluded.amount,
	unsummed    = unsummed + excluded.unsummed`,
				k.source, k.hour, k.outcome, k.currency, st.deliveries, st.mismatches, st.moneyMismatches, st.withAmount, st.amount+st.amountErr,
				st.unsummed); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("roll up stats: %w", err)
	}
	if !moved {
		return 0, nil
	}
	db.totals.moved(upto, false)
	return n, nil
}

// add adds o to st.
func (st *statsSum) add(o statsSum) {
	st.deliveries += o.deliveries
	st.mismatches += o.mismatches
	st.moneyMismatches += o.moneyMismatches
	st.withAmount += o.withAmount
	st.unsummed += o.unsummed
	st.addAmount(o.amount)
	st.amountErr += o.amountErr
}

// sqlStatsSource is the source that the hourly totals count a row of table (an alias of
// deliveries) under: statsSource, in SQL. The two change together.
func sqlStatsSource(table string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s.outcome = 'rejected' AND %[1]s.status = %[2]d THEN '%[3]s' ELSE %[1]s.source END`,
		table, storage.StatusUnknownSource, storage.UnknownSources)
}

// statsSource is the source that the hourly totals count a delivery under, for the
// totals the writer keeps (totals.go): sqlStatsSource, in Go.
func statsSource(outcome storage.Outcome, status int, source string) string {
	if outcome == storage.Rejected && status == storage.StatusUnknownSource {
		return storage.UnknownSources
	}
	return source
}

// sqlAmountReal is column, a delivery's amount, as the hourly totals sum it when it is
// a storage.PlainAmount (sqlPlainAmount): by its magnitude, as the ledger sums money
// (storage.MoneyMinor), for the dashboard's money caught is the ledger's; NULL
// otherwise, counted as unsummed.
func sqlAmountReal(column string) string {
	return `CASE WHEN ` + sqlPlainAmount(column) + ` THEN abs(CAST(` + column + ` AS REAL)) END`
}

// sqlPlainAmount is storage.PlainAmount in SQL, for column: a plain decimal number
// within its bounds. GLOB has no repetition, so the sign is cut off first and the rest
// must start with a digit, hold digits and at most one point, and not end with it.
// GLOB, length and the cast to a number stop at a NUL byte, which a JSON string sends
// as \u0000: "5\x00x" would pass as 5, so the text must be as long in bytes as the
// characters that GLOB saw, all of them ASCII.
func sqlPlainAmount(column string) string {
	return fmt.Sprintf(`(length(CAST(%[1]s AS BLOB)) = length(%[1]s) AND
	(CASE WHEN %[1]s GLOB '-*' THEN substr(%[1]s, 2) ELSE %[1]s END) GLOB '[0-9]*' AND
	NOT (CASE WHEN %[1]s GLOB '-*' THEN substr(%[1]s, 2) ELSE %[1]s END) GLOB '*[^0-9.]*' AND
	NOT %[1]s GLOB '*.*.*' AND NOT %[1]s GLOB '*.' AND
	CASE WHEN instr(%[1]s, '.') = 0 THEN length(ltrim(%[1]s, '-')) <= %[2]d
		ELSE instr(ltrim(%[1]s, '-'), '.') - 1 <= %[2]d AND length(%[1]s) - instr(%[1]s, '.') <= %[3]d END)`,
		column, storage.MaxAmountWhole, storage.MaxAmountFrac)
}

// statsTail bounds how many deliveries not rolled up yet DeliveryStats counts as it
// reads. The roll-up runs every few seconds, so the tail is a few seconds of intake;
// a longer one (a first start on a large database) is left to the roll-up, and the
// dashboard catches up with it.
const statsTail = 20000

// DeliveryStats returns the deliveries received in [from, to) per source, outcome,
// currency and period of step (a whole number of hours), oldest first. Periods start at from. It
// reads the hourly totals that RollupStats keeps, and counts the deliveries received
// since it last ran (up to statsTail of them) as it reads, in the same snapshot: its
// figures are current, it writes nothing, and its cost does not grow with the
// deliveries. The rejections of names that no source has come under UnknownSources.
func (db *DB) DeliveryStats(ctx context.Context, from, to time.Time, step time.Duration) ([]storage.StatBucket, error) {
	hours := int64(step / time.Hour)
	if hours < 1 {
		hours = 1
	}
	first := from.UnixMilli() / 3600000
	// One statement, so one snapshot: a roll-up that commits meanwhile moves its mark
	// and its totals together, and the tail read here starts from the mark read here.
	rows, err := db.read.QueryContext(ctx, `
WITH tail AS (
	SELECT `+sqlStatsSource("deliveries")+` AS source, received_at / 3600000 AS hour, outcome, mismatch, money_mismatch, amount, currency FROM deliveries
	WHERE id > (SELECT rolled_up_to FROM delivery_stats_mark) ORDER BY id LIMIT ?4),
counts AS (
	SELECT source, hour, outcome, currency, deliveries, mismatches, money_mismatches, with_amount, amount, unsummed
	FROM delivery_stats WHERE hour >= ?1 AND hour < ?3
	UNION ALL
	SELECT source, hour, outcome, CASE WHEN amount != '' THEN currency ELSE '' END, 1, mismatch != 0,
		money_mismatch != 0, amount != '', `+sqlAmountReal("amount")+`,
		amount != '' AND NOT `+sqlPlainAmount("amount")+`
	FROM tail WHERE hour >= ?1 AND hour < ?3)
SELECT source, (hour - ?1) / ?2, outcome, currency, sum(deliveries), sum(mismatches), sum(money_mismatches),
	sum(with_amount), total(amount), sum(unsummed)
FROM counts GROUP BY 1, 2, 3, 4 ORDER BY 2, 1, 3, 4`, first, hours, (to.UnixMilli()+3599999)/3600000, statsTail)
	if err != nil {
		return nil, fmt.Errorf("delivery stats: %w", err)
	}
	defer rows.Close()
	var out []storage.StatBucket
	for rows.Next() {
		var b storage.StatBucket
		var n int64
		var outcome string
		if err := rows.Scan(&b.Source, &n, &outcome, &b.Currency, &b.Deliveries, &b.Mismatches, &b.MoneyMismatches, &b.WithAmount, &b.Amount,
			&b.Unsummed); err != nil {
			return nil, fmt.Errorf("delivery stats: %w", err)
		}
		b.Outcome = storage.Outcome(outcome)
		b.Start = time.UnixMilli((first + n*hours) * 3600000).UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}
