package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hookdedup/hookdedup/storage"
)

// dayMillis is the ledger's day, for the SQL that numbers days.
const dayMillis = storage.LedgerDayMillis

// Ledger returns the money caught and at risk that f selects, per day, source,
// property and currency, and its totals per currency. It reads, in one snapshot, the
// daily totals that RollupLedger keeps, the duplicates not folded in yet (up to
// statsTail of them) and the suspects through their index of flag times. Its cost
// grows with the rows it returns (days, properties, currencies) and the suspects, not
// with the deliveries: the totals are summed by SQLite from ledger_totals, and with
// f.Limit only the first rows are read.
func (db *DB) Ledger(ctx context.Context, f storage.LedgerFilter) (storage.Ledger, error) {
	fromDay, toDay := storage.LedgerDays(f)
	where, fargs := ledgerWhere(f)
	args := append([]any{fromDay, toDay}, fargs...)
	var out storage.Ledger
	err := db.readSnapshot(ctx, func(c *sql.Conn) error {
		b := storage.NewLedgerBuilder(f.Limit)
		// The few rows that are not in the daily totals: duplicates not folded yet, and
		// suspects.
		tail, err := c.QueryContext(ctx, `SELECT day, source, property, currency, amount, money_mismatch FROM (
	SELECT received_at / `+strconv.Itoa(dayMillis)+` AS day, source, property, currency, amount, money_mismatch
	FROM deliveries
	WHERE outcome = 'duplicate' AND outcome != 'accepted' AND id > (SELECT rolled_up_to FROM ledger_mark)
	ORDER BY id LIMIT `+strconv.Itoa(statsTail)+`)
WHERE day >= ?1 AND day < ?2 AND (amount != '' OR money_mismatch)`+where, args...)
		if err != nil {
			return err
		}
		defer tail.Close()
		for tail.Next() {
			var k storage.LedgerKey
			var amount string
			var mm bool
			if err := tail.Scan(&k.Day, &k.Source, &k.Property, &k.Currency, &amount, &mm); err != nil {
				return err
			}
			b.Duplicate(k, amount, mm)
		}
		if err := tail.Err(); err != nil {
			return err
		}
		sus, err := c.QueryContext(ctx, `SELECT flagged_at / `+strconv.Itoa(dayMillis)+`, source, property, currency, kind, state, amount,
	delivery
FROM suspects WHERE flagged_at >= ?1 * `+strconv.Itoa(dayMillis)+` AND flagged_at < ?2 * `+strconv.Itoa(dayMillis)+`
	AND state IN ('open', 'confirmed')`+where, args...)
		if err != nil {
			return err
		}
		defer sus.Close()
		for sus.Next() {
			var k storage.LedgerKey
			var kind, state, amount string
			var delivery int64
			if err := sus.Scan(&k.Day, &k.Source, &k.Property, &k.Currency, &kind, &state, &amount, &delivery); err != nil {
				return err
			}
			b.Suspect(k, storage.SuspectKind(kind), state, amount, delivery)
		}
		if err := sus.Err(); err != nil {
			return err
		}

		// The totals: the daily totals summed by SQLite (the builder adds the rows above).
		// Without a property, from the totals over properties: a few hundred rows.
		table := "ledger_totals"
		if f.Property != "" {
			table = "ledger_days"
		}
		// The amounts are summed in two parts, neither of which can overflow SQLite's
		// sum() (an error, not a wrap), and put together here, where a total that no
		// int64 holds is counted as unsummed.
		tr, err := c.QueryContext(ctx, `SELECT currency, kind, sum(deliveries), sum(amount / `+minorSplit+`),
	sum(amount % `+minorSplit+`), sum(unsummed), sum(no_amount) FROM `+table+`
WHERE day >= ?1 AND day < ?2`+where+` GROUP BY currency, kind`, args...)
		if err != nil {
			return err
		}
		defer tr.Close()
		for tr.Next() {
			var currency, kind string
			var m storage.Money
			var high, low int64
			if err := tr.Scan(&currency, &kind, &m.Count, &high, &low, &m.Unsummed, &m.NoAmount); err != nil {
				return err
			}
			b.Total(currency, kind, m.SplitSum(high, low))
		}
		if err := tr.Err(); err != nil {
			return err
		}

		// The daily rows in the builder's order, read only up to the limit.
		rows, err := c.QueryContext(ctx, `SELECT day, source, property, currency, kind, deliveries, amount, unsummed, no_amount
FROM ledger_days WHERE day >= ?1 AND day < ?2`+where+`
ORDER BY day DESC, source, property, currency = '', currency`, args...)
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

// readSnapshot runs fn on a read connection inside one read transaction: every query
// of fn sees the same snapshot of the database, as one statement does. (BEGIN is sent
// by hand: database/sql's transactions on these connections begin IMMEDIATE, which
// would take the write lock.)
func (db *DB) readSnapshot(ctx context.Context, fn func(c *sql.Conn) error) error {
	c, err := db.read.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return err
	}
	// The transaction ends whatever happens, before the connection goes back to the pool.
	defer c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	return fn(c)
}

// ledgerWhere is f's conditions on source, property and currency, for ledger_days,
// the tail and the suspects alike (each has these columns), with their arguments
// numbered from ?3 (?1 and ?2 are the days).
func ledgerWhere(f storage.LedgerFilter) (string, []any) {
	var b strings.Builder
	var args []any
	for _, c := range []struct{ col, v string }{{"source", f.Source}, {"property", f.Property}, {"currency", f.Currency}} {
		if c.v != "" {
			args = append(args, c.v)
			fmt.Fprintf(&b, " AND %s = ?%d", c.col, 2+len(args))
		}
	}
	return b.String(), args
}

// sqlLedgerAddAmount adds a roll-up's amounts to a daily total's. SQLite turns an
// integer sum that overflows into a float, which no reader could take for an exact
// amount again: a sum no int64 holds keeps the total's amount and counts the roll-up's
// summed deliveries as unsummed instead (those without an amount stay counted apart,
// as Money.Add counts them).
const sqlLedgerAddAmount = `
	amount    = CASE WHEN typeof(amount + excluded.amount) = 'integer' THEN amount + excluded.amount ELSE amount END,
	unsummed  = unsummed + CASE WHEN typeof(amount + excluded.amount) = 'integer' THEN excluded.unsummed
		ELSE excluded.deliveries - excluded.no_amount END,
	no_amount = no_amount + excluded.no_amount`

// minorSplit splits amounts in minor units in two for the ledger's totals: each part
// summed over every row stays far within an int64.
const minorSplit = "1000000000"

// RollupLedger folds up to limit duplicates not yet counted into the daily totals that
// Ledger reads, and reports how many it folded (fewer than limit: it has caught up).
// What the writer kept of the duplicates it stored is folded as it is (totals.go); the
// rest it reads through the index of duplicates and rejections, on a read connection,
// and it writes only the few totals they make; like RollupStats, concurrent calls are
// safe: the mark moves only from where the counting started.
func (db *DB) RollupLedger(ctx context.Context, limit int) (int, error) {
	var (
		mark, upto int64
		n          int
		totals     = map[ledgerKey]*storage.Money{}
	)
	money := func(k ledgerKey) *storage.Money {
		m := totals[k]
		if m == nil {
			m = &storage.Money{}
			totals[k] = m
		}
		return m
	}
	read := func(after, upto int64, limit int) (n int, last int64, err error) {
		if upto == noBound {
			upto = math.MaxInt64
		}
		rows, err := db.read.QueryContext(ctx, `
SELECT id, received_at / `+strconv.Itoa(dayMillis)+`, source, property, currency, amount, money_mismatch FROM deliveries
WHERE outcome = 'duplicate' AND outcome != 'accepted' AND id > ? AND id <= ? ORDER BY id LIMIT ?`, after, upto, limit)
		if err != nil {
			return 0, 0, err
		}
		defer rows.Close()
		for rows.Next() {
			var day int64
			var source, property, currency, amount string
			var mm bool
			if err := rows.Scan(&last, &day, &source, &property, &currency, &amount, &mm); err != nil {
				return 0, 0, err
			}
			n++
			if amount != "" {
				money(ledgerKey{day, source, property, currency, storage.LedgerCaught}).AddAmount(amount, currency)
			}
			if mm {
				money(ledgerKey{day, source, property, currency, storage.LedgerMoneyMismatch}).AddAmount(amount, currency)
			}
		}
		return n, last, rows.Err()
	}
	fold := func(s *span) {
		for k, m := range s.ledger {
			money(k).Add(m)
		}
	}
	err := func() error {
		if err := db.read.QueryRowContext(ctx, `SELECT rolled_up_to FROM ledger_mark`).Scan(&mark); err != nil {
			return err
		}
		var err error
		n, upto, err = db.totals.walk(mark, limit, true, read, fold)
		return err
	}()
	if err != nil {
		return 0, fmt.Errorf("roll up ledger: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	var moved bool
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE ledger_mark SET rolled_up_to = ? WHERE rolled_up_to = ?`, upto, mark)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // another call counted this stretch first
		}
		moved = true
		// Prepared once for all the totals: a statement per total parsed anew each time
		// cost the roll-up as much as the rest of its write.
		days, err := tx.PrepareContext(ctx, `
INSERT INTO ledger_days (day, source, property, currency, kind, deliveries, amount, unsummed, no_amount)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (day, source, property, currency, kind) DO UPDATE SET
	deliveries = deliveries + excluded.deliveries,`+sqlLedgerAddAmount)
		if err != nil {
			return err
		}
		defer days.Close()
		sums, err := tx.PrepareContext(ctx, `
INSERT INTO ledger_totals (day, source, currency, kind, deliveries, amount, unsummed, no_amount)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (day, source, currency, kind) DO UPDATE SET
	deliveries = deliveries + excluded.deliveries,`+sqlLedgerAddAmount)
		if err != nil {
			return err
		}
		defer sums.Close()
		for k, m := range totals {
			if _, err := days.ExecContext(ctx, k.day, k.source, k.property, k.curr, k.kind, m.Count, m.Minor, m.Unsummed, m.NoAmount); err != nil {
				return err
			}
			if _, err := sums.ExecContext(ctx, k.day, k.source, k.curr, k.kind, m.Count, m.Minor, m.Unsummed, m.NoAmount); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("roll up ledger: %w", err)
	}
	if !moved {
		return 0, nil
	}
	db.totals.moved(upto, true)
	return n, nil
}
