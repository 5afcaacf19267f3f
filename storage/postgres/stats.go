package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// The roll-ups (RollupStats, RollupLedger) fold deliveries into totals from a mark, an
// id: every delivery up to it is counted in the totals, none after it, and the readers
// (DeliveryStats, Ledger) add the deliveries after it as they read. That holds only if
// no delivery ever commits below a mark once it has moved. With one database and
// several replicas it could: ids come from a sequence, each transaction takes its own
// at its start, and transactions commit in any order. A roll-up that folded every id it
// sees above its mark could pass id 7 while the transaction holding it is still running,
// fold 8 and 9, and never count 7.
//
// So a roll-up folds only up to safe_to (rollup_fences), an id below which every
// delivery is final, committed or never to be, and it moves safe_to with a fence: it
// reads the last id that the sequence handed out, then the transactions that hold ids
// of it at that moment, as pg_locks lists them (nextval keeps a RowExclusiveLock on the
// sequence until its transaction ends). A transaction that took an id up to that last
// one took it before the read, so it has ended or is in the list. When the list is
// empty, or at a later roll-up when none of its transactions runs any more, every id up
// to the fence is final, and the fold reads them in a snapshot taken after that (a
// transaction is visible to new snapshots before it lets go of its locks).
//
// The price: under steady intake a fence usually has holders, and the roll-up folds up
// to the previous fence, a roll-up behind; the readers count the rest as they read, so
// their figures stay current. Nothing is written on intake's side, no column, no index:
// the alternatives (each delivery's transaction id, indexed, to fold in commit order; a
// row per delivery to mark it folded) cost every delivery a write, and a lag window
// (fold only what is older than a minute) is a guess that a stalled transaction can
// outlast. A transaction that holds ids and never ends (its client gone, its connection
// not closed) holds the roll-ups back until the server ends it:
// idle_in_transaction_session_timeout bounds that. The sequence must keep its cache of
// 1 (the default): with cached ids a session could hand out an id below the fence
// later, holding no lock at the read.

// sqlIDHolders selects, in pg_locks, the transactions that took ids of the sequence $1
// and have not ended: nextval holds a RowExclusiveLock on the sequence until its
// transaction ends (an identity column's default takes its ids through nextval too).
const sqlIDHolders = `locktype = 'relation' AND relation = $1::regclass
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND mode = 'RowExclusiveLock'`

// Roll-ups, as rollup_fences names them.
const (
	fenceStats    = "stats"
	fenceLedger   = "ledger"
	fenceSuspects = "suspects"
)

// rollupSequences names the sequence whose ids each roll-up folds: the deliveries' for
// the statistics and the ledger, the suspects' identity for their totals. The same
// fence keeps a suspect that commits late from being passed as a delivery's.
var rollupSequences = map[string]string{
	fenceStats:    "delivery_ids",
	fenceLedger:   "delivery_ids",
	fenceSuspects: "suspects_id_seq",
}

// rollupSafeTo returns the id up to which every row of its sequence (rollupSequences)
// is final, for the roll-up named rollup, whose advisory lock tx holds, and moves its
// fence (see above). tx must be READ COMMITTED (beginRollup), so that the fold's query
// that follows takes a snapshot after these.
func rollupSafeTo(ctx context.Context, tx pgx.Tx, rollup string) (int64, error) {
	seq := rollupSequences[rollup]
	var safe, fence int64
	var holders []string
	err := tx.QueryRow(ctx, `SELECT safe_to, fence_to, holders FROM rollup_fences WHERE rollup = $1`, rollup).
		Scan(&safe, &fence, &holders)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("read fence: %w", err)
	}
	if fence > safe {
		var running bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE `+sqlIDHolders+`
	AND virtualtransaction = ANY($2))`, seq, holders).Scan(&running)
		if err != nil {
			return 0, fmt.Errorf("check fence: %w", err)
		}
		if running {
			return safe, nil // the fence stands until they end
		}
		safe = fence
	}
	// A new fence: the last id handed out first, then who holds ids; in that order, so
	// that whoever took an id up to it is in the list or done.
	var last int64
	// Read from the sequence's relation, which takes the lock every reader takes:
	// pg_sequence_last_value would take the one sqlIDHolders looks for, and this
	// roll-up would stand as a holder of ids in another's fence until it ended.
	err = tx.QueryRow(ctx, `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM `+pgx.Identifier{seq}.Sanitize()).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("read last id: %w", err)
	}
	holders = []string{} // not nil: the column holds no NULL
	if last > safe {
		rows, err := tx.Query(ctx, `SELECT virtualtransaction FROM pg_locks WHERE `+sqlIDHolders+`
	AND pid IS DISTINCT FROM pg_backend_pid()`, seq)
		if err != nil {
			return 0, fmt.Errorf("read id holders: %w", err)
		}
		if holders, err = pgx.AppendRows(holders, rows, pgx.RowTo[string]); err != nil {
			return 0, fmt.Errorf("read id holders: %w", err)
		}
		fence = last
		if len(holders) == 0 {
			safe = last
		}
	} else {
		fence = safe
	}
	_, err = tx.Exec(ctx, `INSERT INTO rollup_fences (rollup, safe_to, fence_to, holders) VALUES ($1, $2, $3, $4)
ON CONFLICT (rollup) DO UPDATE SET safe_to = excluded.safe_to, fence_to = excluded.fence_to, holders = excluded.holders`,
		rollup, safe, fence, holders)
	if err != nil {
		return 0, fmt.Errorf("write fence: %w", err)
	}
	return safe, nil
}

// beginRollup starts a roll-up in tx, which must not have run a statement yet: it makes
// tx READ COMMITTED, whatever the database's default, so that each statement sees what
// committed before it (rollupSafeTo relies on it), and takes the roll-up's advisory
// lock. It reports whether the lock was granted: when not, another replica is rolling up.
func (db *DB) beginRollup(ctx context.Context, tx pgx.Tx, lock int64) (bool, error) {
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`); err != nil {
		return false, fmt.Errorf("begin roll-up: %w", err)
	}
	return db.tryLock(ctx, tx, lock)
}

// RollupStats folds up to limit deliveries not yet counted into the hourly totals that
// DeliveryStats reads, and reports how many it folded (fewer than limit: it has caught
// up, or the rest are not final yet: see above). It then folds up to limit duplicates
// into the ledger's daily totals (RollupLedger), which keep a mark of their own. One
// replica rolls up at a time: while another holds rollupStatsLock, this does nothing
// and returns 0.
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

// rollupStats folds, in one transaction under rollupStatsLock, up to limit deliveries
// after the mark and up to the safe id into the hourly totals, and moves the mark to
// the last of them. The deliveries are read and counted here, their amounts summed
// exactly in minor units as the ledger sums them, which SQL's sum of text cast to
// numbers cannot; the totals and the mark commit together, which is what the readers'
// snapshot relies on.
func (db *DB) rollupStats(ctx context.Context, limit int) (int, error) {
	type key struct {
		source, outcome, currency string
		hour                      int64
	}
	type sum struct {
		deliveries, mismatches, moneyMismatches int64
		money                                   storage.Money
	}
	var n int
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		n = 0
		if got, err := db.beginRollup(ctx, tx, rollupStatsLock); err != nil || !got {
			return err
		}
		safe, err := rollupSafeTo(ctx, tx, fenceStats)
		if err != nil {
			return err
		}
		var mark int64
		err = tx.QueryRow(ctx, `SELECT coalesce((SELECT rolled_up_to FROM delivery_stats_mark WHERE id = 1), 0)`).Scan(&mark)
		if err != nil {
			return fmt.Errorf("read mark: %w", err)
		}
		if safe <= mark {
			return nil
		}
		rows, err := tx.Query(ctx, `
SELECT id, `+sqlStatsSource+`, received_at / 3600000, outcome, currency, mismatch, money_mismatch, amount
FROM deliveries WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3`, mark, safe, limit)
		if err != nil {
			return fmt.Errorf("read deliveries: %w", err)
		}
		totals := map[key]*sum{}
		var upto int64
		var k key
		var currency, amount string
		var mm, moneyMM bool
		_, err = pgx.ForEachRow(rows, []any{&upto, &k.source, &k.hour, &k.outcome, &currency, &mm, &moneyMM, &amount}, func() error {
			n++
			k.currency = ""
			if amount != "" {
				k.currency = currency
			}
			st := totals[k]
			if st == nil {
				st = &sum{}
				totals[k] = st
			}
			st.deliveries++
			if mm {
				st.mismatches++
			}
			if moneyMM {
				st.moneyMismatches++
			}
			if amount != "" {
				st.money.AddAmount(amount, currency)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read deliveries: %w", err)
		}
		if n == 0 {
			return nil
		}
		batch := &pgx.Batch{}
		for k, st := range totals {
			batch.Queue(`INSERT INTO delivery_stats AS s (source, hour, outcome, currency, deliveries, mismatches, money_mismatches,
	with_amount, amount_minor, unsummed)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (source, hour, outcome, currency) DO UPDATE SET
	deliveries       = s.deliveries + excluded.deliveries,
	mismatches       = s.mismatches + excluded.mismatches,
	money_mismatches = s.money_mismatches + excluded.money_mismatches,
	with_amount      = s.with_amount + excluded.with_amount,`+sqlStatsAddAmount,
				k.source, k.hour, k.outcome, k.currency, st.deliveries, st.mismatches, st.moneyMismatches,
				st.money.Count, st.money.Minor, st.money.Unsummed)
		}
		batch.Queue(`INSERT INTO delivery_stats_mark (id, rolled_up_to) VALUES (1, $1)
ON CONFLICT (id) DO UPDATE SET rolled_up_to = excluded.rolled_up_to`, upto)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("add totals: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("roll up stats: %w", err)
	}
	return n, nil
}

// sqlStatsAddAmount adds a roll-up's amounts to an hourly total (alias s), as
// sqlLedgerAdd adds them to a daily one: bigint arithmetic fails on overflow, so a sum
// that no int64 holds keeps the total's amount and counts the roll-up's amounts as
// unsummed instead, as Money.Add does.
const sqlStatsAddAmount = `
	amount_minor = CASE WHEN s.amount_minor::numeric + excluded.amount_minor BETWEEN -9223372036854775808 AND 9223372036854775807
		THEN s.amount_minor + excluded.amount_minor ELSE s.amount_minor END,
	unsummed     = s.unsummed + CASE WHEN s.amount_minor::numeric + excluded.amount_minor BETWEEN -9223372036854775808 AND 9223372036854775807
		THEN excluded.unsummed ELSE excluded.with_amount END`

// sqlStatsSource is the source that the hourly totals count a delivery under.
var sqlStatsSource = fmt.Sprintf(`CASE WHEN outcome = 'rejected' AND status = %d THEN '%s' ELSE source END`,
	storage.StatusUnknownSource, storage.UnknownSources)

// statsTail bounds how many deliveries not rolled up yet DeliveryStats and Ledger count
// as they read. The roll-up runs every few seconds, so the tail is a few seconds of
// intake; a longer one (a first start on a large database) is left to the roll-up, and
// the dashboard catches up with it.
const statsTail = 20000

// DeliveryStats returns the deliveries received in [from, to) per source, outcome,
// currency and period of step (a whole number of hours), oldest first. Periods start at
// from. It reads the hourly totals that RollupStats keeps, and counts the deliveries
// after the roll-up's mark (up to statsTail of them) as it reads, in the same snapshot
// (a read-only REPEATABLE READ transaction): its figures are current, it writes
// nothing, and its cost does not grow with the deliveries. The rejections of names that
// no source has come under UnknownSources. Amounts are summed exactly in minor units,
// as the ledger sums them.
func (db *DB) DeliveryStats(ctx context.Context, from, to time.Time, step time.Duration) ([]storage.StatBucket, error) {
	hours := int64(step / time.Hour)
	if hours < 1 {
		hours = 1
	}
	first := from.UnixMilli() / 3600000
	args := []any{first, hours, (to.UnixMilli() + 3599999) / 3600000, statsTail}
	tail := `tail AS (
	SELECT ` + sqlStatsSource + ` AS source, received_at / 3600000 AS hour, outcome, mismatch, money_mismatch, amount, currency
	FROM deliveries
	WHERE id > coalesce((SELECT rolled_up_to FROM delivery_stats_mark WHERE id = 1), 0) ORDER BY id LIMIT $4)`
	type place struct {
		source, outcome, currency string
		period                    int64
	}
	var out []storage.StatBucket
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = nil
		// Text is ordered byte by byte (COLLATE "C"), as SQLite orders it, whatever the
		// database's collation. sum() of bigint is numeric, exact at any size: a sum that
		// no int64 holds comes back NULL. The tail's amounts are summed below, one by one.
		rows, err := tx.Query(ctx, `
WITH `+tail+`,
counts AS (
	SELECT source, hour, outcome, currency, deliveries, mismatches, money_mismatches, with_amount, amount_minor, unsummed
	FROM delivery_stats WHERE hour >= $1 AND hour < $3
	UNION ALL
	SELECT source, hour, outcome, CASE WHEN amount <> '' THEN currency ELSE '' END, 1, mismatch::int,
		money_mismatch::int, 0, 0, 0
	FROM tail WHERE hour >= $1 AND hour < $3)
SELECT source, (hour - $1) / $2 AS period, outcome, currency, sum(deliveries)::bigint, sum(mismatches)::bigint,
	sum(money_mismatches)::bigint, sum(with_amount)::bigint,
	CASE WHEN sum(amount_minor) BETWEEN `+strconv.FormatInt(math.MinInt64, 10)+` AND `+strconv.FormatInt(math.MaxInt64, 10)+`
		THEN sum(amount_minor)::bigint END,
	sum(unsummed)::bigint
FROM counts GROUP BY source, period, outcome, currency
ORDER BY period, source COLLATE "C", outcome COLLATE "C", currency COLLATE "C"`, args...)
		if err != nil {
			return err
		}
		at := map[place]int{}
		var money []storage.Money
		var b storage.StatBucket
		var n int64
		var outcome string
		var m storage.Money
		var minor *int64
		_, err = pgx.ForEachRow(rows, []any{&b.Source, &n, &outcome, &b.Currency, &b.Deliveries, &b.Mismatches,
			&b.MoneyMismatches, &m.Count, &minor, &m.Unsummed}, func() error {
			if minor == nil {
				m = m.SumLost() // no int64 holds the sum
			} else {
				m.Minor = *minor
			}
			b.Outcome = storage.Outcome(outcome)
			b.Start = time.UnixMilli((first + n*hours) * 3600000).UTC()
			at[place{b.Source, outcome, b.Currency, n}] = len(out)
			out = append(out, b)
			money = append(money, m)
			return nil
		})
		if err != nil {
			return err
		}
		amounts, err := tx.Query(ctx, `WITH `+tail+`
SELECT source, (hour - $1) / $2, outcome, currency, amount FROM tail WHERE hour >= $1 AND hour < $3 AND amount <> ''`, args...)
		if err != nil {
			return err
		}
		var p place
		var amount string
		_, err = pgx.ForEachRow(amounts, []any{&p.source, &p.period, &p.outcome, &p.currency, &amount}, func() error {
			i, ok := at[p]
			if !ok {
				return fmt.Errorf("the tail's amount of %s %s %q has no count", p.source, p.outcome, p.currency)
			}
			var one storage.Money
			one.AddAmount(amount, p.currency)
			money[i].Add(one)
			return nil
		})
		if err != nil {
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
