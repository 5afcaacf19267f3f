package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hookdedup/hookdedup/storage"
)

// The running totals of suspects (migration 0021): suspect_totals counts every suspect
// up to suspect_totals_mark's id, each in the state it has now; the readers add the
// suspects after the mark as they read, in the same snapshot. Suspects are only ever
// appended (ids grow, in commit order: one writer) and never deleted, and only a
// review changes one: in the write transaction that changes it, a review moves a
// suspect at or below the mark from its old state's row to its new one's, and counts
// itself in tail_reviews when the suspect is after the mark, so that a roll-up that
// read it before the review does not fold the state it had.
//
// The totals hold amounts in minor units as one currency table read them (the mark's
// currency_table): under another table (a build that changed a currency's decimals)
// the readers ignore them and read every suspect, and the roll-up empties them, puts
// the mark back to 0 and folds them all again under its own (a review under the new
// table empties them alike). A suspect's state changed other than by ReviewSuspect
// (which counts itself in the suspect's reviews column) makes the trigger of
// migration 0021 empty the totals the same way, or count in tail_reviews.

// sqlSuspectTail is the suspects not folded into the totals yet, read through the
// table's ids from the mark on.
const sqlSuspectTail = `SELECT kind, state, currency, amount, ` + sqlSuspectRepeat + ` FROM suspects s WHERE id > ` + sqlSuspectMark

// sqlSuspectRepeat says whether the suspect s is a repeat: an earlier suspect of its
// delivery, kind and state counts the delivery's money already (migration 0038). The
// suspects of one delivery are written with it, so this reads a few rows by
// suspects_delivery. A review that moves a folded suspect keeps the totals so
// (reviewSuspectTotals).
const sqlSuspectRepeat = `EXISTS (SELECT 1 FROM suspects o WHERE o.delivery = s.delivery AND o.kind = s.kind AND o.state = s.state
	AND o.id < s.id)`

// sqlSuspectMark is the mark as the readers take it, for the currency table ?1: 0,
// every suspect read from the table, when the totals were summed under another one.
const sqlSuspectMark = `(SELECT CASE currency_table WHEN ?1 THEN rolled_up_to ELSE 0 END FROM suspect_totals_mark)`

// sqlSuspectTotals is the running totals, a row per source, kind, state and currency.
// None when they were summed under another currency table than ?1.
const sqlSuspectTotals = `SELECT kind, state, currency, suspects, amount_high, amount_low, unsummed, no_amount, repeats FROM suspect_totals
WHERE (SELECT currency_table FROM suspect_totals_mark) = ?1`

// sqlOpenSuspects counts the open suspects per source: the totals and the suspects
// after the mark, in one statement, so one snapshot. NOT INDEXED keeps SQLite on the
// ids from the mark: the partial index of open suspects would read every open one.
const sqlOpenSuspects = `SELECT source, sum(n) FROM (
	SELECT source, suspects AS n FROM suspect_totals
	WHERE state = 'open' AND (SELECT currency_table FROM suspect_totals_mark) = ?1
	UNION ALL
	SELECT source, count(*) FROM suspects NOT INDEXED
	WHERE id > ` + sqlSuspectMark + ` AND state = 'open' GROUP BY source)
GROUP BY source HAVING sum(n) > 0`

// sqlSuspectTotalAdd adds one row's counts to the totals.
const sqlSuspectTotalAdd = `INSERT INTO suspect_totals (source, kind, state, currency, suspects, amount_high, amount_low, unsummed,
	no_amount, repeats)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, kind, state, currency) DO UPDATE SET
	suspects    = suspects + excluded.suspects,
	amount_high = amount_high + excluded.amount_high,
	amount_low  = amount_low + excluded.amount_low,
	unsummed    = unsummed + excluded.unsummed,
	no_amount   = no_amount + excluded.no_amount,
	repeats     = repeats + excluded.repeats`

// suspectKey is a row of the totals.
type suspectKey struct{ source, kind, state, currency string }

func addSuspectTotal(ctx context.Context, tx *sql.Tx, k suspectKey, t storage.SuspectTotal) error {
	_, err := tx.ExecContext(ctx, sqlSuspectTotalAdd, k.source, k.kind, k.state, k.currency, t.Count, t.High, t.Low, t.Unsummed, t.NoAmount, t.Repeats)
	return err
}

// SuspectCounts counts every suspect by kind, state and currency, with their amounts
// summed exactly per currency (the money at stake), ordered by kind, state and
// currency (no currency last). It reads, in one snapshot, the running totals (a few
// rows) and the suspects after their mark, which the roll-up keeps to a few seconds'
// worth; before the roll-up has caught up (a database from before the totals) every
// suspect after the mark is read, and the counts are exact, only slower.
func (db *DB) SuspectCounts(ctx context.Context) ([]storage.SuspectCount, error) {
	type key struct{ kind, state, currency string }
	sums := storage.SuspectSums{}
	table := storage.CurrencyTable()
	err := db.readSnapshot(ctx, func(c *sql.Conn) error {
		rows, err := c.QueryContext(ctx, sqlSuspectTotals, table)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k key
			var t storage.SuspectTotal
			if err := rows.Scan(&k.kind, &k.state, &k.currency, &t.Count, &t.High, &t.Low, &t.Unsummed, &t.NoAmount, &t.Repeats); err != nil {
				return err
			}
			sums.At(k.kind, k.state, k.currency).Add(t)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		tail, err := c.QueryContext(ctx, sqlSuspectTail, table)
		if err != nil {
			return err
		}
		defer tail.Close()
		for tail.Next() {
			var k key
			var amount string
			var repeat bool
			if err := tail.Scan(&k.kind, &k.state, &k.currency, &amount, &repeat); err != nil {
				return err
			}
			sums.At(k.kind, k.state, k.currency).AddSuspect(amount, k.currency, repeat, 1)
		}
		return tail.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("suspect counts: %w", err)
	}
	return sums.Counts(), nil
}

// RollupSuspects folds up to limit suspects not yet counted into the running totals
// that SuspectCounts and OpenSuspects read, and reports how many it folded (fewer than
// limit: it has caught up). It reads them on a read connection, in one snapshot with
// the mark, and writes only the few totals they make: the mark moves only if neither
// it nor tail_reviews changed since the read, so concurrent calls count a stretch
// once, and a review of a suspect of the stretch meanwhile makes this call fold
// nothing (the next one reads the state the review left). Totals summed under another
// currency table are emptied first, and folded again from the first suspect.
func (db *DB) RollupSuspects(ctx context.Context, limit int) (int, error) {
	table := storage.CurrencyTable()
	for range 2 { // once more after emptying the totals
		n, emptied, err := db.rollupSuspects(ctx, limit, table)
		if err != nil || !emptied {
			return n, err
		}
	}
	return 0, nil
}

// rollupSuspects is one roll-up under the currency table table; when the totals were
// summed under another one it empties them instead, and reports it.
func (db *DB) rollupSuspects(ctx context.Context, limit int, table string) (n int, emptied bool, err error) {
	var (
		mark, reviews, upto int64
		was                 string
		totals              = map[suspectKey]*storage.SuspectTotal{}
	)
	err = db.readSnapshot(ctx, func(c *sql.Conn) error {
		if err := c.QueryRowContext(ctx, `SELECT rolled_up_to, tail_reviews, currency_table FROM suspect_totals_mark`).Scan(&mark, &reviews, &was); err != nil {
			return err
		}
		if was != table {
			return nil
		}
		rows, err := c.QueryContext(ctx, `SELECT id, source, kind, state, currency, amount, `+sqlSuspectRepeat+` FROM suspects s
WHERE id > ? ORDER BY id LIMIT ?`, mark, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k suspectKey
			var amount string
			var repeat bool
			if err := rows.Scan(&upto, &k.source, &k.kind, &k.state, &k.currency, &amount, &repeat); err != nil {
				return err
			}
			n++
			t := totals[k]
			if t == nil {
				t = &storage.SuspectTotal{}
				totals[k] = t
			}
			t.AddSuspect(amount, k.currency, repeat, 1)
		}
		return rows.Err()
	})
	if err != nil {
		return 0, false, fmt.Errorf("roll up suspects: %w", err)
	}
	if was != table {
		err = db.writeTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE suspect_totals_mark SET rolled_up_to = 0, tail_reviews = tail_reviews + 1, currency_table = ?
WHERE rolled_up_to = ? AND tail_reviews = ? AND currency_table = ?`, table, mark, reviews, was)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return err // another call emptied them first
			}
			_, err = tx.ExecContext(ctx, `DELETE FROM suspect_totals`)
			return err
		})
		if err != nil {
			return 0, false, fmt.Errorf("roll up suspects: empty the totals of another currency table: %w", err)
		}
		return 0, true, nil
	}
	if n == 0 {
		return 0, false, nil
	}
	var moved bool
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		moved = false
		res, err := tx.ExecContext(ctx, `UPDATE suspect_totals_mark SET rolled_up_to = ?
WHERE rolled_up_to = ? AND tail_reviews = ? AND currency_table = ?`, upto, mark, reviews, table)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // another call folded this stretch first, or a review changed it
		}
		moved = true
		for k, t := range totals {
			if err := addSuspectTotal(ctx, tx, k, *t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("roll up suspects: %w", err)
	}
	if !moved {
		return 0, false, nil
	}
	return n, false, nil
}

// reviewSuspectTotals keeps the totals right as a review, in tx, moves suspect x from
// its state to state: a suspect folded in already moves from its old state's row to
// its new one's; one after the mark is counted in tail_reviews, so that a roll-up that
// read it before this review folds nothing. Totals of another currency table are
// emptied instead.
func reviewSuspectTotals(ctx context.Context, tx *sql.Tx, x storage.Suspect, state string) error {
	if x.State == state {
		return nil
	}
	var mark int64
	var table string
	if err := tx.QueryRowContext(ctx, `SELECT rolled_up_to, currency_table FROM suspect_totals_mark`).Scan(&mark, &table); err != nil {
		return err
	}
	if now := storage.CurrencyTable(); table != now {
		// Summed under another currency table: taking the amount out under this one
		// would be wrong, and leaving them as they are would count the suspect in its
		// old state should that table come back. They are emptied, as the roll-up
		// would, and folded again under this one.
		if _, err := tx.ExecContext(ctx, `DELETE FROM suspect_totals`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE suspect_totals_mark SET rolled_up_to = 0, tail_reviews = tail_reviews + 1, currency_table = ?`, now)
		return err
	}
	// A later suspect of the delivery and kind after the mark is read as a repeat or
	// not by the state x has: a roll-up that read it before this review must not write.
	var later bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM suspects WHERE delivery = ? AND kind = ? AND id > ? AND id > ?)`,
		x.Delivery, string(x.Kind), x.ID, mark).Scan(&later); err != nil {
		return err
	}
	if x.ID > mark || later {
		if _, err := tx.ExecContext(ctx, `UPDATE suspect_totals_mark SET tail_reviews = tail_reviews + 1`); err != nil {
			return err
		}
	}
	if x.ID > mark {
		return nil
	}
	// The folded totals count each delivery's money once in a state: x takes it out of
	// its old state unless another folded suspect of its delivery and kind stays there,
	// and adds it to the new one unless one is there already.
	others := func(in string) (bool, error) {
		var ok bool
		err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM suspects WHERE delivery = ? AND kind = ? AND state = ? AND id != ? AND id <= ?)`,
			x.Delivery, string(x.Kind), in, x.ID, mark).Scan(&ok)
		return ok, err
	}
	stays, err := others(x.State)
	if err != nil {
		return err
	}
	joins, err := others(state)
	if err != nil {
		return err
	}
	var out, in storage.SuspectTotal
	out.AddSuspect(x.Amount, x.Currency, stays, -1)
	in.AddSuspect(x.Amount, x.Currency, joins, 1)
	if err := addSuspectTotal(ctx, tx, suspectKey{x.Source, string(x.Kind), x.State, x.Currency}, out); err != nil {
		return err
	}
	return addSuspectTotal(ctx, tx, suspectKey{x.Source, string(x.Kind), state, x.Currency}, in)
}
