package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// dayMillis is the ledger's day, for the SQL that numbers days.
const dayMillis = storage.LedgerDayMillis

// Ledger returns the money caught and at risk that f selects, per day, source,
// property and currency, and its totals per currency. It reads, in one snapshot (a
// read-only REPEATABLE READ transaction), the daily totals that RollupLedger keeps, the
// duplicates after its mark (up to statsTail of them) and the suspects through their
// index of flag times. Its cost grows with the rows it returns (days, properties,
// currencies) and the suspects, not with the deliveries: the totals are summed by
// PostgreSQL from ledger_totals, and with f.Limit only the first rows are read.
func (db *DB) Ledger(ctx context.Context, f storage.LedgerFilter) (storage.Ledger, error) {
	fromDay, toDay := storage.LedgerDays(f)
	where, fargs := ledgerWhere(f)
	args := append([]any{fromDay, toDay}, fargs...)
	var out storage.Ledger
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		b := storage.NewLedgerBuilder(f.Limit)
		// The few rows that are not in the daily totals: duplicates not folded yet, and
		// suspects.
		tail, err := tx.Query(ctx, `SELECT day, source, property, currency, amount, money_mismatch FROM (
	SELECT received_at / `+strconv.Itoa(dayMillis)+` AS day, source, property, currency, amount, money_mismatch
	FROM deliveries
	WHERE `+sqlDuplicates+` AND id > coalesce((SELECT rolled_up_to FROM ledger_mark WHERE id = 1), 0)
	ORDER BY outcome, id LIMIT `+strconv.Itoa(statsTail)+`) AS t
WHERE day >= $1 AND day < $2 AND (amount <> '' OR money_mismatch)`+where, args...)
		if err != nil {
			return err
		}
		var k storage.LedgerKey
		var amount string
		var mm bool
		_, err = pgx.ForEachRow(tail, []any{&k.Day, &k.Source, &k.Property, &k.Currency, &amount, &mm}, func() error {
			b.Duplicate(k, amount, mm)
			return nil
		})
		if err != nil {
			return err
		}
		sus, err := tx.Query(ctx, `SELECT flagged_at / `+strconv.Itoa(dayMillis)+`, source, property, currency, kind, state,
	amount, delivery
FROM suspects WHERE flagged_at >= $1::bigint * `+strconv.Itoa(dayMillis)+` AND flagged_at < $2::bigint * `+strconv.Itoa(dayMillis)+`
	AND state IN ('open', 'confirmed')`+where+` ORDER BY flagged_at, id`, args...)
		if err != nil {
			return err
		}
		var kind, state string
		var delivery int64
		_, err = pgx.ForEachRow(sus, []any{&k.Day, &k.Source, &k.Property, &k.Currency, &kind, &state, &amount, &delivery}, func() error {
			b.Suspect(k, storage.SuspectKind(kind), state, amount, delivery)
			return nil
		})
		if err != nil {
			return err
		}

		// The totals: the daily totals summed by PostgreSQL (the builder adds the rows
		// above). Without a property, from the totals over properties: a few hundred rows.
		table := "ledger_totals"
		if f.Property != "" {
			table = "ledger_days"
		}
		// sum() of bigint is numeric, exact at any size: a sum that no int64 holds
		// comes back NULL and is counted as unsummed.
		tr, err := tx.Query(ctx, `SELECT currency, kind, sum(deliveries)::bigint,
	CASE WHEN sum(amount) BETWEEN `+strconv.FormatInt(math.MinInt64, 10)+` AND `+strconv.FormatInt(math.MaxInt64, 10)+`
		THEN sum(amount)::bigint END,
	sum(unsummed)::bigint, sum(no_amount)::bigint
FROM `+table+` WHERE day >= $1 AND day < $2`+where+` GROUP BY currency, kind`, args...)
		if err != nil {
			return err
		}
		var currency string
		var count, unsummed, noAmount int64
		var minor *int64
		_, err = pgx.ForEachRow(tr, []any{&currency, &kind, &count, &minor, &unsummed, &noAmount}, func() error {
			m := storage.Money{Count: count, Unsummed: unsummed, NoAmount: noAmount}
			if minor == nil {
				m = m.SumLost() // no int64 holds the sum
			} else {
				m.Minor = *minor
			}
			b.Total(currency, kind, m)
			return nil
		})
		if err != nil {
			return err
		}

		// The daily rows in the builder's order, read only up to the limit: byte by
		// byte (COLLATE "C"), as the builder merges them, whatever the database's
		// collation.
		rows, err := tx.Query(ctx, `SELECT day, source, property, currency, kind, deliveries, amount, unsummed, no_amount
FROM ledger_days WHERE day >= $1 AND day < $2`+where+`
ORDER BY day DESC, source COLLATE "C", property COLLATE "C", currency = '', currency COLLATE "C"`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k storage.LedgerKey
			var kind string
			var m storage.Money
			if err := rows.Scan(&k.Day, &k.Source, &k.Property, &k.Currency, &kind, &m.Count, &m.Minor, &m.Unsummed, &m.NoAmount); err != nil {
				return err
			}
			if !b.DayTotal(k, kind, m) {
				break
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		out = b.Result()
		return nil
	})
	if err != nil {
		return storage.Ledger{}, fmt.Errorf("ledger: %w", err)
	}
	return out, nil
}

// ledgerWhere is f's conditions on source, property and currency, for ledger_days,
// ledger_totals, the tail and the suspects alike (each has these columns), with their
// arguments numbered from $3 ($1 and $2 are the days). A value that PostgreSQL's text
// cannot hold is looked up as intake would have stored it.
func ledgerWhere(f storage.LedgerFilter) (string, []any) {
	var b strings.Builder
	var args []any
	for _, c := range []struct{ col, v string }{{"source", f.Source}, {"property", f.Property}, {"currency", f.Currency}} {
		if c.v != "" {
			args = append(args, textSafe(c.v))
			fmt.Fprintf(&b, " AND %s = $%d", c.col, 2+len(args))
		}
	}
	return b.String(), args
}

// sqlLedgerAdd adds a roll-up's counts and amounts to a daily total (alias t). bigint
// arithmetic fails on overflow: a sum no int64 holds keeps the total's amount and
// counts the roll-up's summed deliveries as unsummed instead, as Money.Add does (those
// without an amount stay counted apart).
const sqlLedgerAdd = `
	deliveries = t.deliveries + excluded.deliveries,
	amount     = CASE WHEN t.amount::numeric + excluded.amount BETWEEN -9223372036854775808 AND 9223372036854775807
		THEN t.amount + excluded.amount ELSE t.amount END,
	unsummed   = t.unsummed + CASE WHEN t.amount::numeric + excluded.amount BETWEEN -9223372036854775808 AND 9223372036854775807
		THEN excluded.unsummed ELSE excluded.deliveries - excluded.no_amount END,
	no_amount  = t.no_amount + excluded.no_amount`

// RollupLedger folds up to limit duplicates not yet counted into the daily totals that
// Ledger reads, and reports how many it folded (fewer than limit: it has caught up, or
// the rest are not final yet: see stats.go). It reads them through the index of
// duplicates and rejections, sums their amounts exactly here, and writes only the few
// totals they make, and the mark, in one transaction under rollupLedgerLock: one
// replica rolls up at a time, and while another holds the lock this does nothing and
// returns 0.
func (db *DB) RollupLedger(ctx context.Context, limit int) (int, error) {
	type key struct {
		day                    int64
		source, property, curr string
		kind                   string
	}
	var n int
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if got, err := db.beginRollup(ctx, tx, rollupLedgerLock); err != nil || !got {
			return err
		}
		safe, err := rollupSafeTo(ctx, tx, fenceLedger)
		if err != nil {
			return err
		}
		var mark int64
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT rolled_up_to FROM ledger_mark WHERE id = 1), 0)`).Scan(&mark); err != nil {
			return fmt.Errorf("read mark: %w", err)
		}
		if safe <= mark {
			return nil
		}
		rows, err := tx.Query(ctx, `
SELECT id, received_at / `+strconv.Itoa(dayMillis)+`, source, property, currency, amount, money_mismatch FROM deliveries
WHERE `+sqlDuplicates+` AND id > $1 AND id <= $2 ORDER BY outcome, id LIMIT $3`, mark, safe, limit)
		if err != nil {
			return fmt.Errorf("read duplicates: %w", err)
		}
		totals := map[key]*storage.Money{}
		var upto, day int64
		var source, property, currency, amount string
		var mm bool
		_, err = pgx.ForEachRow(rows, []any{&upto, &day, &source, &property, &currency, &amount, &mm}, func() error {
			n++
			add := func(kind string) {
				k := key{day, source, property, currency, kind}
				m := totals[k]
				if m == nil {
					m = &storage.Money{}
					totals[k] = m
				}
				m.AddAmount(amount, currency)
			}
			if amount != "" {
				add(storage.LedgerCaught)
			}
			if mm {
				add(storage.LedgerMoneyMismatch)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read duplicates: %w", err)
		}
		if n == 0 {
			return nil
		}
		batch := &pgx.Batch{}
		for k, m := range totals {
			batch.Queue(`INSERT INTO ledger_days AS t (day, source, property, currency, kind, deliveries, amount, unsummed, no_amount)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (day, source, property, currency, kind) DO UPDATE SET`+sqlLedgerAdd,
				k.day, k.source, k.property, k.curr, k.kind, m.Count, m.Minor, m.Unsummed, m.NoAmount)
			batch.Queue(`INSERT INTO ledger_totals AS t (day, source, currency, kind, deliveries, amount, unsummed, no_amount)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (day, source, currency, kind) DO UPDATE SET`+sqlLedgerAdd,
				k.day, k.source, k.curr, k.kind, m.Count, m.Minor, m.Unsummed, m.NoAmount)
		}
		batch.Queue(`INSERT INTO ledger_mark (id, rolled_up_to) VALUES (1, $1)
ON CONFLICT (id) DO UPDATE SET rolled_up_to = excluded.rolled_up_to`, upto)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("add totals: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("roll up ledger: %w", err)
	}
	return n, nil
}
