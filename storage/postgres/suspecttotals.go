package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// The running totals of suspects (migration 0010): suspect_totals counts every suspect
// up to suspect_totals_mark's id, each in the state it has now; the readers add the
// suspects after the mark as they read, in one snapshot. Suspects are only ever
// appended and never deleted, and only a review changes one. Their ids come from a
// sequence and commit in any order, so the roll-up folds only up to its fence, as the
// deliveries' roll-ups do (stats.go): no suspect commits at or below the mark once it
// has moved.
//
// A review and a roll-up on two replicas take turns on the mark's row: each locks it
// (FOR UPDATE) before anything else of the totals, in a READ COMMITTED transaction,
// and every writer of suspect_totals holds it. A roll-up that locked it first folds
// the suspects as they are, moves the mark and commits; the review, which waited,
// then reads the new mark (READ COMMITTED returns the row as the roll-up left it) and
// moves the suspect it finds folded from its old state's row to its new one's. A
// review that locked it first commits its new state before the roll-up reads its
// stretch, in a snapshot taken after the lock. Either way each suspect is counted
// once, in the state it has.
//
// The totals hold amounts in minor units as one currency table read them (the mark's
// currency_table): under another table (a build that changed a currency's decimals)
// the readers take the mark for 0 and ignore the totals, and the roll-up or a review
// empties them and puts the mark back to 0 (emptyForeignTotals), the roll-up folding
// every suspect again under its own. Left as they are, a review would take an amount
// out under the wrong table, or, should the old table come back, find them valid again
// without its move.

// sqlSuspectTail is the suspects after the mark $1. It is planned for the mark it is
// given (customPlan): the roll-up keeps the tail to a few seconds' worth, which the
// primary key finds; a database from before the totals has every suspect in it until
// the roll-up catches up, and PostgreSQL reads the table whole meanwhile, as it should.
// A generic plan, made for no mark in particular, could read it whole every time.
const sqlSuspectTail = `SELECT source, kind, state, currency, amount, ` + sqlSuspectRepeat + ` FROM suspects s WHERE id > $1`

// sqlSuspectRepeat says whether the suspect s is a repeat: an earlier suspect of its
// delivery, kind and state counts the delivery's money already (migration 0026). The
// suspects of one delivery are written with it, in one transaction, so they commit
// together and this reads a few rows by suspects_delivery. A review that moves a
// folded suspect keeps the totals so (reviewSuspectTotals).
const sqlSuspectRepeat = `EXISTS (SELECT 1 FROM suspects o WHERE o.delivery = s.delivery AND o.kind = s.kind AND o.state = s.state
	AND o.id < s.id)`

// sqlOpenSuspects counts the open suspects per source: the totals' (none unless $2,
// they were summed under this build's currency table) and those after the mark $1
// (planned for it, as sqlSuspectTail).
const sqlOpenSuspects = `SELECT source, sum(n)::bigint FROM (
	SELECT source, suspects AS n FROM suspect_totals WHERE state = 'open' AND $2::boolean
	UNION ALL
	SELECT source, count(*) FROM suspects WHERE id > $1 AND state = 'open' GROUP BY source) AS t
GROUP BY source HAVING sum(n) > 0`

// sqlSuspectFold is the roll-up's stretch: up to $3 suspects after the mark $1, up to
// the safe id $2.
const sqlSuspectFold = `SELECT id, source, kind, state, currency, amount, ` + sqlSuspectRepeat + ` FROM suspects s
WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3`

// sqlSuspectTotals is the running totals, a row per source, kind, state and currency.
const sqlSuspectTotals = `SELECT source, kind, state, currency, suspects, amount_high, amount_low, unsummed, no_amount, repeats
FROM suspect_totals`

// sqlSuspectTotalAdd adds one row's counts to the totals (alias t). Neither part of
// the amounts can overflow a bigint before a billion suspects (storage.SuspectTotal).
const sqlSuspectTotalAdd = `INSERT INTO suspect_totals AS t (source, kind, state, currency, suspects, amount_high, amount_low, unsummed,
	no_amount, repeats)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (source, kind, state, currency) DO UPDATE SET
	suspects    = t.suspects + excluded.suspects,
	amount_high = t.amount_high + excluded.amount_high,
	amount_low  = t.amount_low + excluded.amount_low,
	unsummed    = t.unsummed + excluded.unsummed,
	no_amount   = t.no_amount + excluded.no_amount,
	repeats     = t.repeats + excluded.repeats`

// suspectKey is a row of the totals.
type suspectKey struct{ source, kind, state, currency string }

// queueSuspectTotal queues the addition of t to the totals' row k.
func queueSuspectTotal(b *pgx.Batch, k suspectKey, t storage.SuspectTotal) {
	b.Queue(sqlSuspectTotalAdd, k.source, k.kind, k.state, k.currency, t.Count, t.High, t.Low, t.Unsummed, t.NoAmount, t.Repeats)
}

// readSuspects runs fn in one snapshot, a read-only REPEATABLE READ transaction, with
// the mark of the suspects' totals as of that snapshot, and whether the totals count
// (they were summed under this build's currency table); when they do not, the mark is
// 0: every suspect is read from the table.
func (db *DB) readSuspects(ctx context.Context, fn func(tx pgx.Tx, mark int64, totals bool) error) error {
	return pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var mark int64
		var table string
		if err := tx.QueryRow(ctx, `SELECT rolled_up_to, currency_table FROM suspect_totals_mark WHERE id = 1`).Scan(&mark, &table); err != nil {
			return err
		}
		if table != storage.CurrencyTable() {
			return fn(tx, 0, false)
		}
		return fn(tx, mark, true)
	})
}

// SuspectCounts counts every suspect by kind, state and currency, with their amounts
// summed exactly per currency (the money at stake), ordered by kind, state and
// currency (no currency last). It reads, in one snapshot, the running totals (a few
// rows) and the suspects after their mark, which the roll-up keeps to a few seconds'
// worth: its cost does not grow with the suspects, and its figures are exact at every
// moment.
func (db *DB) SuspectCounts(ctx context.Context) ([]storage.SuspectCount, error) {
	sums := storage.SuspectSums{}
	err := db.readSuspects(ctx, func(tx pgx.Tx, mark int64, totals bool) error {
		var k suspectKey
		if totals {
			var t storage.SuspectTotal
			rows, err := tx.Query(ctx, sqlSuspectTotals)
			if err != nil {
				return err
			}
			_, err = pgx.ForEachRow(rows, []any{&k.source, &k.kind, &k.state, &k.currency, &t.Count, &t.High, &t.Low, &t.Unsummed, &t.NoAmount, &t.Repeats},
				func() error {
					sums.At(k.kind, k.state, k.currency).Add(t)
					return nil
				})
			if err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, sqlSuspectTail, customPlan([]any{mark})...)
		if err != nil {
			return err
		}
		var amount string
		var repeat bool
		_, err = pgx.ForEachRow(rows, []any{&k.source, &k.kind, &k.state, &k.currency, &amount, &repeat}, func() error {
			sums.At(k.kind, k.state, k.currency).AddSuspect(amount, k.currency, repeat, 1)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("suspect counts: %w", err)
	}
	return sums.Counts(), nil
}

// OpenSuspects returns, per source, how many suspected doubles wait for a review: the
// running totals' open rows and the open suspects after their mark, in one snapshot.
func (db *DB) OpenSuspects(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := db.readSuspects(ctx, func(tx pgx.Tx, mark int64, totals bool) error {
		rows, err := tx.Query(ctx, sqlOpenSuspects, customPlan([]any{mark, totals})...)
		if err != nil {
			return err
		}
		var source string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&source, &n}, func() error {
			out[source] = n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open suspects: %w", err)
	}
	return out, nil
}

// lockSuspectMark locks the mark of the suspects' totals for the rest of tx, which
// must be READ COMMITTED, and returns it as the last writer left it, with the currency
// table the totals were summed under.
func lockSuspectMark(ctx context.Context, tx pgx.Tx) (mark int64, table string, err error) {
	if err := tx.QueryRow(ctx, `SELECT rolled_up_to, currency_table FROM suspect_totals_mark WHERE id = 1 FOR UPDATE`).Scan(&mark, &table); err != nil {
		return 0, "", fmt.Errorf("lock the suspects' mark: %w", err)
	}
	return mark, table, nil
}

// emptyForeignTotals empties the totals, in tx, which holds the mark (mark, summed
// under table), when table is not this build's currency table, and returns the mark
// as it leaves it: 0 then, as it was otherwise.
func emptyForeignTotals(ctx context.Context, tx pgx.Tx, mark int64, table string) (int64, error) {
	now := storage.CurrencyTable()
	if table == now {
		return mark, nil
	}
	// Few rows: one per source, kind, state and currency.
	if _, err := tx.Exec(ctx, `DELETE FROM suspect_totals`); err != nil {
		return 0, fmt.Errorf("empty the totals of another currency table: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE suspect_totals_mark SET rolled_up_to = 0, currency_table = $1 WHERE id = 1`, now); err != nil {
		return 0, fmt.Errorf("empty the totals of another currency table: %w", err)
	}
	return 0, nil
}

// RollupSuspects folds, in one transaction under rollupSuspectsLock, up to limit
// suspects after the mark and up to the safe id (stats.go) into the running totals,
// and moves the mark to the last of them; it reports how many it folded (fewer than
// limit: it has caught up, or the rest are not final yet). One replica rolls up at a
// time: while another holds the lock this does nothing and returns 0. Totals summed
// under another currency table are emptied first, and folded again from the first
// suspect.
func (db *DB) RollupSuspects(ctx context.Context, limit int) (int, error) {
	var n int
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if got, err := db.beginRollup(ctx, tx, rollupSuspectsLock); err != nil || !got {
			return err
		}
		safe, err := rollupSafeTo(ctx, tx, fenceSuspects)
		if err != nil {
			return err
		}
		mark, table, err := lockSuspectMark(ctx, tx)
		if err != nil {
			return err
		}
		if mark, err = emptyForeignTotals(ctx, tx, mark, table); err != nil {
			return err
		}
		if safe <= mark {
			return nil
		}
		// A snapshot taken after the lock: every review that changed a suspect of the
		// stretch has committed.
		rows, err := tx.Query(ctx, sqlSuspectFold, mark, safe, limit)
		if err != nil {
			return fmt.Errorf("read suspects: %w", err)
		}
		totals := map[suspectKey]*storage.SuspectTotal{}
		var upto int64
		var k suspectKey
		var amount string
		var repeat bool
		_, err = pgx.ForEachRow(rows, []any{&upto, &k.source, &k.kind, &k.state, &k.currency, &amount, &repeat}, func() error {
			n++
			t := totals[k]
			if t == nil {
				t = &storage.SuspectTotal{}
				totals[k] = t
			}
			t.AddSuspect(amount, k.currency, repeat, 1)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read suspects: %w", err)
		}
		if n == 0 {
			return nil
		}
		batch := &pgx.Batch{}
		for k, t := range totals {
			queueSuspectTotal(batch, k, *t)
		}
		batch.Queue(`UPDATE suspect_totals_mark SET rolled_up_to = $1 WHERE id = 1`, upto)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("add totals: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("roll up suspects: %w", err)
	}
	return n, nil
}

// reviewSuspectTotals moves suspect x, folded into the totals when its id is at or
// below mark (locked by the review's tx), from its state's row to state's.
func reviewSuspectTotals(ctx context.Context, tx pgx.Tx, mark int64, x storage.Suspect, state string) error {
	if x.State == state || x.ID > mark {
		return nil // the readers read it as it is
	}
	// The folded totals count each delivery's money once in a state: x takes it out of
	// its old state unless another folded suspect of its delivery and kind stays there,
	// and adds it to the new one unless one is there already. A roll-up waits for the
	// mark tx holds, so it reads the later suspects' states as this review leaves them.
	var stays, joins bool
	err := tx.QueryRow(ctx, `SELECT
	EXISTS (SELECT 1 FROM suspects WHERE delivery = $1 AND kind = $2 AND state = $3 AND id <> $5 AND id <= $6),
	EXISTS (SELECT 1 FROM suspects WHERE delivery = $1 AND kind = $2 AND state = $4 AND id <> $5 AND id <= $6)`,
		x.Delivery, string(x.Kind), x.State, state, x.ID, mark).Scan(&stays, &joins)
	if err != nil {
		return err
	}
	var out, in storage.SuspectTotal
	out.AddSuspect(x.Amount, x.Currency, stays, -1)
	in.AddSuspect(x.Amount, x.Currency, joins, 1)
	batch := &pgx.Batch{}
	queueSuspectTotal(batch, suspectKey{x.Source, string(x.Kind), x.State, x.Currency}, out)
	queueSuspectTotal(batch, suspectKey{x.Source, string(x.Kind), state, x.Currency}, in)
	return tx.SendBatch(ctx, batch).Close()
}
