package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// Ledger kinds of ledger_days.
const (
	ledgerCaught        = "caught"
	ledgerMoneyMismatch = "money_mismatch"
)

const dayMillis = 24 * 60 * 60 * 1000

// dayOf is the day (UTC) of t as ledger_days numbers it; a zero t is zero.
func dayOf(t time.Time, zero int64) int64 {
	if t.IsZero() {
		return zero
	}
	ms := t.UnixMilli()
	d := ms / dayMillis
	if ms < 0 && ms%dayMillis != 0 {
		d--
	}
	return d
}

// ledgerKey is a ledger row's place: ledger rows are ordered by it, newest day first,
// then by source, property and currency (no currency last).
type ledgerKey struct {
	day                        int64
	source, property, currency string
}

func compareLedgerKeys(a, b ledgerKey) int {
	return cmp.Or(cmp.Compare(b.day, a.day), cmp.Compare(a.source, b.source), cmp.Compare(a.property, b.property),
		compareCurrency(a.currency, b.currency))
}

func (k ledgerKey) row() *storage.LedgerRow {
	return &storage.LedgerRow{Day: time.UnixMilli(k.day * dayMillis).UTC(), Source: k.source, Property: k.property, Currency: k.currency}
}

// Ledger returns the money caught and at risk that f selects, per day, source,
// property and currency, and its totals per currency. It reads, in one snapshot, the
// daily totals that RollupLedger keeps, the duplicates not folded in yet (up to
// statsTail of them) and the suspects through their index of flag times. Its cost
// grows with the rows it returns (days, properties, currencies) and the suspects, not
// with the deliveries: the totals are summed by SQLite from ledger_totals, and with
// f.Limit only the first rows are read.
func (db *DB) Ledger(ctx context.Context, f storage.LedgerFilter) (storage.Ledger, error) {
	fromDay, toDay := dayOf(f.From, math.MinInt64/dayMillis), dayOf(f.To, math.MaxInt64/dayMillis)
	if !f.To.IsZero() && f.To.UnixMilli()%dayMillis != 0 {
		toDay++ // a To within a day includes that day
	}
	where, fargs := ledgerWhere(f)
	args := append([]any{fromDay, toDay}, fargs...)
	var out storage.Ledger
	err := db.readSnapshot(ctx, func(c *sql.Conn) error {
		// The few rows that are not in the daily totals: duplicates not folded yet, and
		// suspects.
		extra := map[ledgerKey]*storage.LedgerRow{}
		get := func(k ledgerKey) *storage.LedgerRow {
			r := extra[k]
			if r == nil {
				r = k.row()
				extra[k] = r
			}
			return r
		}
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
			var k ledgerKey
			var amount string
			var mm bool
			if err := tail.Scan(&k.day, &k.source, &k.property, &k.currency, &amount, &mm); err != nil {
				return err
			}
			r := get(k)
			if amount != "" {
				r.Caught.AddAmount(amount, k.currency)
			}
			if mm {
				r.MoneyMismatch.AddAmount(amount, k.currency)
			}
		}
		if err := tail.Err(); err != nil {
			return err
		}
		// One delivery may carry several suspects (a re-send under a new id that a
		// correlation rule finds too); its money is at risk, or confirmed, once.
		open, confirmed := map[int64]bool{}, map[int64]bool{}
		sus, err := c.QueryContext(ctx, `SELECT flagged_at / `+strconv.Itoa(dayMillis)+`, source, property, currency, kind, state, amount,
	delivery
FROM suspects WHERE flagged_at >= ?1 * `+strconv.Itoa(dayMillis)+` AND flagged_at < ?2 * `+strconv.Itoa(dayMillis)+`
	AND state IN ('open', 'confirmed')`+where, args...)
		if err != nil {
			return err
		}
		defer sus.Close()
		for sus.Next() {
			var k ledgerKey
			var kind, state, amount string
			var delivery int64
			if err := sus.Scan(&k.day, &k.source, &k.property, &k.currency, &kind, &state, &amount, &delivery); err != nil {
				return err
			}
			r := get(k)
			if state == storage.SuspectConfirmed {
				if !confirmed[delivery] {
					confirmed[delivery] = true
					r.Confirmed.AddAmount(amount, k.currency)
				}
			} else if m := r.Open(storage.SuspectKind(kind)); m != nil {
				m.AddAmount(amount, k.currency)
				if open[delivery] {
					r.Overlap.AddAmount(amount, k.currency)
				}
				open[delivery] = true
			}
		}
		if err := sus.Err(); err != nil {
			return err
		}

		// The totals: the daily totals summed by SQLite, and the rows above.
		totals := map[string]*storage.LedgerRow{}
		total := func(currency string) *storage.LedgerRow {
			t := totals[currency]
			if t == nil {
				t = &storage.LedgerRow{Currency: currency}
				totals[currency] = t
			}
			return t
		}
		// Without a property, from the totals over properties: a few hundred rows.
		table := "ledger_totals"
		if f.Property != "" {
			table = "ledger_days"
		}
		// The amounts are summed in two parts, neither of which can overflow SQLite's
		// sum() (an error, not a wrap), and put together here, where a total that no
		// int64 holds is counted as unsummed.
		tr, err := c.QueryContext(ctx, `SELECT currency, kind, sum(deliveries), sum(amount / `+minorSplit+`),
	sum(amount % `+minorSplit+`), sum(unsummed) FROM `+table+`
WHERE day >= ?1 AND day < ?2`+where+` GROUP BY currency, kind`, args...)
		if err != nil {
			return err
		}
		defer tr.Close()
		for tr.Next() {
			var currency, kind string
			var m storage.Money
			var high, low int64
			if err := tr.Scan(&currency, &kind, &m.Count, &high, &low, &m.Unsummed); err != nil {
				return err
			}
			n := new(big.Int).Mul(big.NewInt(high), big.NewInt(1_000_000_000))
			if n.Add(n, big.NewInt(low)); n.IsInt64() {
				m.Minor = n.Int64()
			} else {
				m.Unsummed = m.Count
			}
			addKind(total(currency), kind, m)
		}
		if err := tr.Err(); err != nil {
			return err
		}
		for _, r := range extra {
			total(r.Currency).Add(*r)
		}
		for _, t := range totals {
			out.Totals = append(out.Totals, *t)
		}
		slices.SortFunc(out.Totals, func(a, b storage.LedgerRow) int { return compareCurrency(a.Currency, b.Currency) })

		// The rows, in order, merging the extra ones in, up to the limit.
		extraKeys := slices.SortedFunc(maps.Keys(extra), compareLedgerKeys)
		// One row past the limit says that there are more.
		full := func() bool { return f.Limit > 0 && len(out.Rows) > f.Limit }
		emit := func(r *storage.LedgerRow, k ledgerKey) {
			for len(extraKeys) > 0 && compareLedgerKeys(extraKeys[0], k) <= 0 && !full() {
				ek := extraKeys[0]
				extraKeys = extraKeys[1:]
				if ek == k {
					r.Add(*extra[ek])
					continue
				}
				out.Rows = append(out.Rows, *extra[ek])
			}
			if r != nil && !full() {
				out.Rows = append(out.Rows, *r)
			}
		}
		rows, err := c.QueryContext(ctx, `SELECT day, source, property, currency, kind, deliveries, amount, unsummed
FROM ledger_days WHERE day >= ?1 AND day < ?2`+where+`
ORDER BY day DESC, source, property, currency = '', currency`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var cur *storage.LedgerRow
		var curKey ledgerKey
		for !full() && rows.Next() {
			var k ledgerKey
			var kind string
			var m storage.Money
			if err := rows.Scan(&k.day, &k.source, &k.property, &k.currency, &kind, &m.Count, &m.Minor, &m.Unsummed); err != nil {
				return err
			}
			if cur == nil || k != curKey {
				if cur != nil {
					emit(cur, curKey)
				}
				cur, curKey = k.row(), k
			}
			addKind(cur, kind, m)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if cur != nil {
			emit(cur, curKey)
		}
		for len(extraKeys) > 0 && !full() {
			out.Rows = append(out.Rows, *extra[extraKeys[0]])
			extraKeys = extraKeys[1:]
		}
		return nil
	})
	if err != nil {
		return storage.Ledger{}, fmt.Errorf("ledger: %w", err)
	}
	if f.Limit > 0 && len(out.Rows) > f.Limit {
		out.Rows, out.More = out.Rows[:f.Limit], true
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

// compareCurrency orders currency codes alphabetically, no currency ("") last.
func compareCurrency(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return cmp.Compare(a, b)
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
// summed deliveries as unsummed instead.
const sqlLedgerAddAmount = `
	amount   = CASE WHEN typeof(amount + excluded.amount) = 'integer' THEN amount + excluded.amount ELSE amount END,
	unsummed = unsummed + CASE WHEN typeof(amount + excluded.amount) = 'integer' THEN excluded.unsummed
		ELSE excluded.deliveries END`

// minorSplit splits amounts in minor units in two for the ledger's totals: each part
// summed over every row stays far within an int64.
const minorSplit = "1000000000"

// RollupLedger folds up to limit duplicates not yet counted into the daily totals that
// Ledger reads, and reports how many it folded (fewer than limit: it has caught up).
// It reads them through the index of duplicates and rejections, on a read connection,
// and writes only the few totals they make; like RollupStats, concurrent calls are
// safe: the mark moves only from where the counting started.
func (db *DB) RollupLedger(ctx context.Context, limit int) (int, error) {
	type key struct {
		day                    int64
		source, property, curr string
		kind                   string
	}
	var (
		mark, upto int64
		n          int
		totals     = map[key]*storage.Money{}
	)
	err := func() error {
		if err := db.read.QueryRowContext(ctx, `SELECT rolled_up_to FROM ledger_mark`).Scan(&mark); err != nil {
			return err
		}
		rows, err := db.read.QueryContext(ctx, `
SELECT id, received_at / `+strconv.Itoa(dayMillis)+`, source, property, currency, amount, money_mismatch FROM deliveries
WHERE outcome = 'duplicate' AND outcome != 'accepted' AND id > ? ORDER BY id LIMIT ?`, mark, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var day int64
			var source, property, currency, amount string
			var mm bool
			if err := rows.Scan(&upto, &day, &source, &property, &currency, &amount, &mm); err != nil {
				return err
			}
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
				add(ledgerCaught)
			}
			if mm {
				add(ledgerMoneyMismatch)
			}
		}
		return rows.Err()
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
		for k, m := range totals {
			if _, err := tx.ExecContext(ctx, `
INSERT INTO ledger_days (day, source, property, currency, kind, deliveries, amount, unsummed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (day, source, property, currency, kind) DO UPDATE SET
	deliveries = deliveries + excluded.deliveries,`+sqlLedgerAddAmount,
				k.day, k.source, k.property, k.curr, k.kind, m.Count, m.Minor, m.Unsummed); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `
INSERT INTO ledger_totals (day, source, currency, kind, deliveries, amount, unsummed)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (day, source, currency, kind) DO UPDATE SET
	deliveries = deliveries + excluded.deliveries,`+sqlLedgerAddAmount,
				k.day, k.source, k.curr, k.kind, m.Count, m.Minor, m.Unsummed); err != nil {
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
	return n, nil
}

// addKind adds m, the daily totals of one kind of ledger_days, to r.
func addKind(r *storage.LedgerRow, kind string, m storage.Money) {
	switch kind {
	case ledgerCaught:
		r.Caught.Add(m)
	case ledgerMoneyMismatch:
		r.MoneyMismatch.Add(m)
	}
}
