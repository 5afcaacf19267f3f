package storage

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
)

// MinorUnits turns amount, in major units of currency as deliveries and suspects keep
// it ("412.50"), into a whole number of minor units (41250), exactly: no float is
// involved. ok is false when amount is no plain decimal number (an optional "-", digits,
// optionally "." and digits), when it has more decimals than the currency has (a
// fraction of a cent is no amount that can be summed exactly), or when it is too large.
func MinorUnits(amount, currency string) (minor int64, ok bool) {
	neg, digits := false, amount
	if rest, cut := strings.CutPrefix(digits, "-"); cut {
		neg, digits = true, rest
	}
	whole, frac, dot := strings.Cut(digits, ".")
	if whole == "" || !allDigits(whole) || (dot && (frac == "" || !allDigits(frac))) {
		return 0, false
	}
	exp := CurrencyExponent(currency)
	frac = strings.TrimRight(frac, "0")
	if len(frac) > exp {
		return 0, false
	}
	n, err := strconv.ParseInt(whole+frac+strings.Repeat("0", exp-len(frac)), 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// FormatMinor writes minor, a whole number of minor units of currency, in its major
// units with the currency's decimals and no separators: 41250 EUR is "412.50", 1200 JPY
// is "1200", 1500 KWD is "1.500".
func FormatMinor(minor int64, currency string) string {
	exp := CurrencyExponent(currency)
	neg := minor < 0
	u := uint64(minor)
	if neg {
		u = uint64(-minor) // two's complement: right for math.MinInt64 too
	}
	s := strconv.FormatUint(u, 10)
	if exp > 0 {
		if len(s) <= exp {
			s = strings.Repeat("0", exp-len(s)+1) + s
		}
		s = s[:len(s)-exp] + "." + s[len(s)-exp:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Money is the deliveries or suspects of one kind in one ledger row: how many, and
// their amounts summed exactly in minor units of the row's currency.
type Money struct {
	Count int64
	Minor int64 // the exact amounts summed, in minor units
	// Unsummed counts those whose amount is no exact number of minor units (text, or a
	// fraction of a cent): counted in Count, left out of Minor.
	Unsummed int64
}

func (m *Money) add(o Money) {
	m.Count += o.Count
	if addOverflows(m.Minor, o.Minor) {
		// No int64 holds the sum: o's amounts are counted, left out of it.
		m.Unsummed += o.Count
		return
	}
	m.Minor += o.Minor
	m.Unsummed += o.Unsummed
}

// addAmount counts one delivery or suspect of amount (major units, "" for none).
func (m *Money) addAmount(amount, currency string) {
	m.Count++
	if amount == "" {
		return
	}
	if n, ok := MinorUnits(amount, currency); ok && !addOverflows(m.Minor, n) {
		m.Minor += n
	} else {
		m.Unsummed++
	}
}

func addOverflows(a, b int64) bool {
	return (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b)
}

// LedgerRow is the money of one day (UTC), source, property and currency: what
// duplicates moved that intake blocked (caught), and what is at risk: money mismatches
// and open suspects by kind. Amounts are in minor units of Currency; sums are never
// taken across currencies.
type LedgerRow struct {
	Day      time.Time // midnight UTC
	Source   string
	Property string
	Currency string // "" for amounts whose source reads no currency
	// Caught: duplicates that carried an amount, blocked (not handed downstream).
	Caught Money
	// MoneyMismatch: duplicates whose amount, currency or status differed from the
	// first delivery's; blocked too (also in Caught when they carried an amount), and
	// at risk: the delivery handed downstream may not be the one that counts.
	MoneyMismatch Money
	// The open suspects of each kind: accepted and handed downstream, not reviewed yet.
	BusinessKey, Correlation, LateDuplicate Money
	// Confirmed: the deliveries an operator confirmed as doubles, of every kind, each
	// once however many of its suspects were confirmed.
	Confirmed Money

	// overlap is what the open suspects of each kind count more than once: the second
	// and later open suspects of one delivery, whose money is at risk only once.
	overlap Money
}

// AtRisk is the row's money at risk: money mismatches and the deliveries of open
// suspects, each delivery once, however many kinds flag it.
func (r LedgerRow) AtRisk() Money {
	m := r.MoneyMismatch
	m.add(r.BusinessKey)
	m.add(r.Correlation)
	m.add(r.LateDuplicate)
	m.Count -= r.overlap.Count
	m.Minor -= r.overlap.Minor
	m.Unsummed -= r.overlap.Unsummed
	return m
}

// Open returns the row's open suspects of kind.
func (r *LedgerRow) Open(kind SuspectKind) *Money {
	switch kind {
	case SuspectBusinessKey:
		return &r.BusinessKey
	case SuspectCorrelation:
		return &r.Correlation
	case SuspectLateDuplicate:
		return &r.LateDuplicate
	}
	return nil
}

// add adds o's money to r's.
func (r *LedgerRow) add(o LedgerRow) {
	r.Caught.add(o.Caught)
	r.MoneyMismatch.add(o.MoneyMismatch)
	r.BusinessKey.add(o.BusinessKey)
	r.Correlation.add(o.Correlation)
	r.LateDuplicate.add(o.LateDuplicate)
	r.Confirmed.add(o.Confirmed)
	r.overlap.add(o.overlap)
}

// LedgerFilter selects the ledger's rows. Empty fields match everything.
type LedgerFilter struct {
	Source, Property string
	Currency         string // "" matches every currency, amounts of none included
	// From and To bound the days, From's day included and To's excluded (UTC); zero
	// is unbounded.
	From, To time.Time
	// Limit bounds the rows returned, newest days first (0: all of them); the totals
	// cover every row.
	Limit int
}

// Ledger is the ledger's rows for a filter, newest day first, then by source,
// property and currency, and their totals per currency.
type Ledger struct {
	Rows []LedgerRow
	// Totals has one row per currency (Day, Source and Property empty), in the order of
	// the codes, amounts of no currency last.
	Totals []LedgerRow
	// More says that rows past the Limit were left out.
	More bool
}

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

func (k ledgerKey) row() *LedgerRow {
	return &LedgerRow{Day: time.UnixMilli(k.day * dayMillis).UTC(), Source: k.source, Property: k.property, Currency: k.currency}
}

// Ledger returns the money caught and at risk that f selects, per day, source,
// property and currency, and its totals per currency. It reads, in one snapshot, the
// daily totals that RollupLedger keeps, the duplicates not folded in yet (up to
// statsTail of them) and the suspects through their index of flag times. Its cost
// grows with the rows it returns (days, properties, currencies) and the suspects, not
// with the deliveries: the totals are summed by SQLite from ledger_totals, and with
// f.Limit only the first rows are read.
func (db *DB) Ledger(ctx context.Context, f LedgerFilter) (Ledger, error) {
	fromDay, toDay := dayOf(f.From, math.MinInt64/dayMillis), dayOf(f.To, math.MaxInt64/dayMillis)
	if !f.To.IsZero() && f.To.UnixMilli()%dayMillis != 0 {
		toDay++ // a To within a day includes that day
	}
	where, fargs := ledgerWhere(f)
	args := append([]any{fromDay, toDay}, fargs...)
	var out Ledger
	err := db.readSnapshot(ctx, func(c *sql.Conn) error {
		// The few rows that are not in the daily totals: duplicates not folded yet, and
		// suspects.
		extra := map[ledgerKey]*LedgerRow{}
		get := func(k ledgerKey) *LedgerRow {
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
				r.Caught.addAmount(amount, k.currency)
			}
			if mm {
				r.MoneyMismatch.addAmount(amount, k.currency)
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
			if state == SuspectConfirmed {
				if !confirmed[delivery] {
					confirmed[delivery] = true
					r.Confirmed.addAmount(amount, k.currency)
				}
			} else if m := r.Open(SuspectKind(kind)); m != nil {
				m.addAmount(amount, k.currency)
				if open[delivery] {
					r.overlap.addAmount(amount, k.currency)
				}
				open[delivery] = true
			}
		}
		if err := sus.Err(); err != nil {
			return err
		}

		// The totals: the daily totals summed by SQLite, and the rows above.
		totals := map[string]*LedgerRow{}
		total := func(currency string) *LedgerRow {
			t := totals[currency]
			if t == nil {
				t = &LedgerRow{Currency: currency}
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
			var m Money
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
			total(currency).addKind(kind, m)
		}
		if err := tr.Err(); err != nil {
			return err
		}
		for _, r := range extra {
			total(r.Currency).add(*r)
		}
		for _, t := range totals {
			out.Totals = append(out.Totals, *t)
		}
		slices.SortFunc(out.Totals, func(a, b LedgerRow) int { return compareCurrency(a.Currency, b.Currency) })

		// The rows, in order, merging the extra ones in, up to the limit.
		extraKeys := slices.SortedFunc(maps.Keys(extra), compareLedgerKeys)
		// One row past the limit says that there are more.
		full := func() bool { return f.Limit > 0 && len(out.Rows) > f.Limit }
		emit := func(r *LedgerRow, k ledgerKey) {
			for len(extraKeys) > 0 && compareLedgerKeys(extraKeys[0], k) <= 0 && !full() {
				ek := extraKeys[0]
				extraKeys = extraKeys[1:]
				if ek == k {
					r.add(*extra[ek])
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
		var cur *LedgerRow
		var curKey ledgerKey
		for !full() && rows.Next() {
			var k ledgerKey
			var kind string
			var m Money
			if err := rows.Scan(&k.day, &k.source, &k.property, &k.currency, &kind, &m.Count, &m.Minor, &m.Unsummed); err != nil {
				return err
			}
			if cur == nil || k != curKey {
				if cur != nil {
					emit(cur, curKey)
				}
				cur, curKey = k.row(), k
			}
			cur.addKind(kind, m)
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
		return Ledger{}, fmt.Errorf("ledger: %w", err)
	}
	if f.Limit > 0 && len(out.Rows) > f.Limit {
		out.Rows, out.More = out.Rows[:f.Limit], true
	}
	return out, nil
}

// addKind adds m, the daily totals of one kind of ledger_days, to r.
func (r *LedgerRow) addKind(kind string, m Money) {
	switch kind {
	case ledgerCaught:
		r.Caught.add(m)
	case ledgerMoneyMismatch:
		r.MoneyMismatch.add(m)
	}
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
func ledgerWhere(f LedgerFilter) (string, []any) {
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
		totals     = map[key]*Money{}
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
					m = &Money{}
					totals[k] = m
				}
				m.addAmount(amount, currency)
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
