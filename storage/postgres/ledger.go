package postgres

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
// then by source, property and currency (no currency last), text byte by byte.
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

// compareCurrency orders currency codes byte by byte, no currency ("") last.
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

// Ledger returns the money caught and at risk that f selects, per day, source,
// property and currency, and its totals per currency. It reads, in one snapshot (a
// read-only REPEATABLE READ transaction), the daily totals that RollupLedger keeps, the
// duplicates after its mark (up to statsTail of them) and the suspects through their
// index of flag times. Its cost grows with the rows it returns (days, properties,
// currencies) and the suspects, not with the deliveries: the totals are summed by
// PostgreSQL from ledger_totals, and with f.Limit only the first rows are read.
func (db *DB) Ledger(ctx context.Context, f storage.LedgerFilter) (storage.Ledger, error) {
	fromDay, toDay := dayOf(f.From, math.MinInt64/dayMillis), dayOf(f.To, math.MaxInt64/dayMillis)
	if !f.To.IsZero() && f.To.UnixMilli()%dayMillis != 0 {
		toDay++ // a To within a day includes that day
	}
	where, fargs := ledgerWhere(f)
	args := append([]any{fromDay, toDay}, fargs...)
	var out storage.Ledger
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = storage.Ledger{}
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
		tail, err := tx.Query(ctx, `SELECT day, source, property, currency, amount, money_mismatch FROM (
	SELECT received_at / `+strconv.Itoa(dayMillis)+` AS day, source, property, currency, amount, money_mismatch
	FROM deliveries
	WHERE `+sqlDuplicates+` AND id > coalesce((SELECT rolled_up_to FROM ledger_mark WHERE id = 1), 0)
	ORDER BY outcome, id LIMIT `+strconv.Itoa(statsTail)+`) AS t
WHERE day >= $1 AND day < $2 AND (amount <> '' OR money_mismatch)`+where, args...)
		if err != nil {
			return err
		}
		var k ledgerKey
		var amount string
		var mm bool
		_, err = pgx.ForEachRow(tail, []any{&k.day, &k.source, &k.property, &k.currency, &amount, &mm}, func() error {
			r := get(k)
			if amount != "" {
				r.Caught.AddAmount(amount, k.currency)
			}
			if mm {
				r.MoneyMismatch.AddAmount(amount, k.currency)
			}
			return nil
		})
		if err != nil {
			return err
		}
		// One delivery may carry several suspects (a re-send under a new id that a
		// correlation rule finds too); its money is at risk, or confirmed, once.
		open, confirmed := map[int64]bool{}, map[int64]bool{}
		sus, err := tx.Query(ctx, `SELECT flagged_at / `+strconv.Itoa(dayMillis)+`, source, property, currency, kind, state,
	amount, delivery
FROM suspects WHERE flagged_at >= $1::bigint * `+strconv.Itoa(dayMillis)+` AND flagged_at < $2::bigint * `+strconv.Itoa(dayMillis)+`
	AND state IN ('open', 'confirmed')`+where+` ORDER BY flagged_at, id`, args...)
		if err != nil {
			return err
		}
		var kind, state string
		var delivery int64
		_, err = pgx.ForEachRow(sus, []any{&k.day, &k.source, &k.property, &k.currency, &kind, &state, &amount, &delivery}, func() error {
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
			return nil
		})
		if err != nil {
			return err
		}

		// The totals: the daily totals summed by PostgreSQL, and the rows above.
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
		// sum() of bigint is numeric, exact at any size: a sum that no int64 holds
		// comes back NULL and is counted as unsummed.
		tr, err := tx.Query(ctx, `SELECT currency, kind, sum(deliveries)::bigint,
	CASE WHEN sum(amount) BETWEEN `+strconv.FormatInt(math.MinInt64, 10)+` AND `+strconv.FormatInt(math.MaxInt64, 10)+`
		THEN sum(amount)::bigint END,
	sum(unsummed)::bigint
FROM `+table+` WHERE day >= $1 AND day < $2`+where+` GROUP BY currency, kind`, args...)
		if err != nil {
			return err
		}
		var currency string
		var count, unsummed int64
		var minor *int64
		_, err = pgx.ForEachRow(tr, []any{&currency, &kind, &count, &minor, &unsummed}, func() error {
			m := storage.Money{Count: count, Unsummed: count}
			if minor != nil {
				m.Minor, m.Unsummed = *minor, unsummed
			}
			addKind(total(currency), kind, m)
			return nil
		})
		if err != nil {
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
		// Byte by byte (COLLATE "C"), as compareLedgerKeys merges them, whatever the
		// database's collation.
		rows, err := tx.Query(ctx, `SELECT day, source, property, currency, kind, deliveries, amount, unsummed
FROM ledger_days WHERE day >= $1 AND day < $2`+where+`
ORDER BY day DESC, source COLLATE "C", property COLLATE "C", currency = '', currency COLLATE "C"`, args...)
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
		rows.Close()
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
// counts the roll-up's summed deliveries as unsummed instead, as Money.Add does.
const sqlLedgerAdd = `
	deliveries = t.deliveries + excluded.deliveries,
	amount     = CASE WHEN t.amount::numeric + excluded.amount BETWEEN -9223372036854775808 AND 9223372036854775807
		THEN t.amount + excluded.amount ELSE t.amount END,
	unsummed   = t.unsummed + CASE WHEN t.amount::numeric + excluded.amount BETWEEN -9223372036854775808 AND 9223372036854775807
		THEN excluded.unsummed ELSE excluded.deliveries END`

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
		if got, err := beginRollup(ctx, tx, rollupLedgerLock); err != nil || !got {
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
				add(ledgerCaught)
			}
			if mm {
				add(ledgerMoneyMismatch)
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
			batch.Queue(`INSERT INTO ledger_days AS t (day, source, property, currency, kind, deliveries, amount, unsummed)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (day, source, property, currency, kind) DO UPDATE SET`+sqlLedgerAdd,
				k.day, k.source, k.property, k.curr, k.kind, m.Count, m.Minor, m.Unsummed)
			batch.Queue(`INSERT INTO ledger_totals AS t (day, source, currency, kind, deliveries, amount, unsummed)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (day, source, currency, kind) DO UPDATE SET`+sqlLedgerAdd,
				k.day, k.source, k.curr, k.kind, m.Count, m.Minor, m.Unsummed)
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

// addKind adds m, the daily totals of one kind of ledger_days, to r.
func addKind(r *storage.LedgerRow, kind string, m storage.Money) {
	switch kind {
	case ledgerCaught:
		r.Caught.Add(m)
	case ledgerMoneyMismatch:
		r.MoneyMismatch.Add(m)
	}
}
