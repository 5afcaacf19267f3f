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
		// Row by row: the amounts are summed here, exactly in minor units, as the
		// ledger sums them, which SQL's sum of text cast to numbers cannot.
		rows, err := db.read.QueryContext(ctx, `
SELECT id, `+sqlStatsSource("deliveries")+`, received_at / 3600000, outcome, currency, mismatch != 0, money_mismatch != 0, amount
FROM deliveries WHERE id > ? AND id <= ? ORDER BY id LIMIT ?`, after, upto, limit)
		if err != nil {
			return 0, 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var k statsKey
			var currency, amount string
			var mm, moneyMM bool
			if err := rows.Scan(&last, &k.source, &k.hour, &k.outcome, &currency, &mm, &moneyMM, &amount); err != nil {
				return 0, 0, err
			}
			n++
			if amount != "" {
				k.currency = currency
			}
			sum(k).count(mm, moneyMM, amount, currency)
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
INSERT INTO delivery_stats (source, hour, outcome, currency, deliveries, mismatches, money_mismatches, with_amount, amount_minor,
	unsummed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, hour, outcome, currency) DO UPDATE SET
	deliveries  = deliveries + excluded.deliveries,
	mismatches  = mismatches + excluded.mismatches,
	money_mismatches = money_mismatches + excluded.money_mismatches,
	with_amount = with_amount + excluded.with_amount,`+sqlStatsAddAmount,
				k.source, k.hour, k.outcome, k.currency, st.deliveries, st.mismatches, st.moneyMismatches, st.money.Count,
				st.money.Minor, st.money.Unsummed); err != nil {
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
	st.money.Add(o.money)
}

// sqlStatsAddAmount adds a roll-up's amounts to an hourly total's, as sqlLedgerAddAmount
// adds them to a daily one: a sum that no int64 holds (SQLite would make it a float)
// keeps the total's amount and counts the roll-up's amounts as unsummed, as Money.Add
// does.
const sqlStatsAddAmount = `
	amount_minor = CASE WHEN typeof(amount_minor + excluded.amount_minor) = 'integer' THEN amount_minor + excluded.amount_minor
		ELSE amount_minor END,
	unsummed     = unsummed + CASE WHEN typeof(amount_minor + excluded.amount_minor) = 'integer' THEN excluded.unsummed
		ELSE excluded.with_amount END`

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
// Amounts are summed exactly in minor units, as the ledger sums them.
func (db *DB) DeliveryStats(ctx context.Context, from, to time.Time, step time.Duration) ([]storage.StatBucket, error) {
	hours := int64(step / time.Hour)
	if hours < 1 {
		hours = 1
	}
	first := from.UnixMilli() / 3600000
	args := []any{first, hours, (to.UnixMilli() + 3599999) / 3600000, statsTail}
	// The tail: the deliveries after the roll-up's mark, read in the snapshot of the
	// totals, so that a roll-up that commits meanwhile is counted once.
	tail := `tail AS (
	SELECT ` + sqlStatsSource("deliveries") + ` AS source, received_at / 3600000 AS hour, outcome, mismatch, money_mismatch, amount, currency
	FROM deliveries WHERE id > (SELECT rolled_up_to FROM delivery_stats_mark) ORDER BY id LIMIT ?4)`
	var out []storage.StatBucket
	err := db.readSnapshot(ctx, func(c *sql.Conn) error {
		// The counts, and the totals' amounts in two parts that SQLite's sum() cannot
		// overflow, put together here. The tail's amounts are summed below, one by one.
		rows, err := c.QueryContext(ctx, `
WITH `+tail+`,
counts AS (
	SELECT source, hour, outcome, currency, deliveries, mismatches, money_mismatches, with_amount, amount_minor, unsummed
	FROM delivery_stats WHERE hour >= ?1 AND hour < ?3
	UNION ALL
	SELECT source, hour, outcome, CASE WHEN amount != '' THEN currency ELSE '' END, 1, mismatch != 0,
		money_mismatch != 0, 0, 0, 0
	FROM tail WHERE hour >= ?1 AND hour < ?3)
SELECT source, (hour - ?1) / ?2, outcome, currency, sum(deliveries), sum(mismatches), sum(money_mismatches),
	sum(with_amount), sum(amount_minor / `+minorSplit+`), sum(amount_minor % `+minorSplit+`), sum(unsummed)
FROM counts GROUP BY 1, 2, 3, 4 ORDER BY 2, 1, 3, 4`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		type place struct {
			source, outcome, currency string
			period                    int64
		}
		at := map[place]int{}
		var money []storage.Money
		for rows.Next() {
			var b storage.StatBucket
			var n, high, low int64
			var outcome string
			var m storage.Money
			if err := rows.Scan(&b.Source, &n, &outcome, &b.Currency, &b.Deliveries, &b.Mismatches, &b.MoneyMismatches,
				&m.Count, &high, &low, &m.Unsummed); err != nil {
				return err
			}
			m = m.SplitSum(high, low)
			b.Outcome = storage.Outcome(outcome)
			b.Start = time.UnixMilli((first + n*hours) * 3600000).UTC()
			at[place{b.Source, outcome, b.Currency, n}] = len(out)
			out = append(out, b)
			money = append(money, m)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		amounts, err := c.QueryContext(ctx, `WITH `+tail+`
SELECT source, (hour - ?1) / ?2, outcome, currency, amount FROM tail WHERE hour >= ?1 AND hour < ?3 AND amount != ''`, args...)
		if err != nil {
			return err
		}
		defer amounts.Close()
		for amounts.Next() {
			var p place
			var amount string
			if err := amounts.Scan(&p.source, &p.period, &p.outcome, &p.currency, &amount); err != nil {
				return err
			}
			i, ok := at[p]
			if !ok {
				return fmt.Errorf("the tail's amount of %s %s %q has no count", p.source, p.outcome, p.currency)
			}
			var one storage.Money
			one.AddAmount(amount, p.currency)
			money[i].Add(one)
		}
		if err := amounts.Err(); err != nil {
			return err
		}
		for i, m := range money {
			out[i].WithAmount, out[i].Minor, out[i].Unsummed = m.Count, m.Minor, m.Unsummed
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delivery stats: %w", err)
	}
	return out, nil
}
