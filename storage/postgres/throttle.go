package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// throttleMemory is how long a scope's failures are kept at most.
const throttleMemory = 24 * time.Hour

// throttleSweepBatch bounds the forgotten scopes one LoginAttempt deletes.
const throttleSweepBatch = 100

// LoginAttempt reserves a password check against scopes at now. When none of them has
// to wait, it counts the attempt as a failure of each, before the password is checked,
// and returns zero: concurrent attempts are counted one after the other, so a burst of
// them cannot all pass while the first is being checked. A right password takes the
// count back with LoginSucceeded. When a scope has to wait, it counts nothing and returns
// until when the longest wait lasts. A scope whose last failure is older than its
// policy's Forget starts counting again. A scope's row is keyed by its
// storage.ThrottleKey, never by the scope as given.
//
// Attempts on every replica are counted one after the other by the scopes' rows: the
// first statement makes a row for each scope that has none and locks them all, in the
// keys' bytewise order (so that two attempts sharing scopes cannot deadlock),
// returning their counts as the last attempt committed them; the wait is decided on
// those, and a second statement counts the attempt in every scope at once, or nothing
// is counted. A scope new to the table gets a row of no failures, which another attempt
// of it waits on like any other: fifty first attempts at once are counted one by one.
func (db *DB) LoginAttempt(ctx context.Context, now time.Time, scopes map[string]storage.Throttle) (time.Time, error) {
	// Each scope's row, by the key the table holds it under, with the longest Forget
	// asked of it.
	forgetOf := map[string]int64{}
	for scope, t := range scopes {
		s, f := storage.ThrottleKey(scope), min(t.Forget, throttleMemory).Milliseconds()
		if old, ok := forgetOf[s]; !ok || f > old {
			forgetOf[s] = f
		}
	}
	stored := slices.Sorted(maps.Keys(forgetOf))
	forget := make([]int64, len(stored))
	for i, s := range stored {
		forget[i] = forgetOf[s]
	}
	var until time.Time
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		until = time.Time{}
		// ON CONFLICT DO UPDATE locks the row it finds, at its newest version, and
		// RETURNING gives that version; a new row has last_at 0, long forgotten.
		rows, err := tx.Query(ctx, `INSERT INTO login_failures AS f (scope, failures, first_at, last_at)
			SELECT s, 0, 0, 0 FROM unnest($1::text[]) WITH ORDINALITY AS u(s, n) ORDER BY n
			ON CONFLICT (scope) DO UPDATE SET failures = f.failures
			RETURNING f.scope, f.failures, f.last_at`, stored)
		if err != nil {
			return err
		}
		type count struct{ failures, lastAt int64 }
		counted := map[string]count{}
		var scope string
		var c count
		if _, err := pgx.ForEachRow(rows, []any{&scope, &c.failures, &c.lastAt}, func() error {
			counted[scope] = c
			return nil
		}); err != nil {
			return err
		}
		for scope, t := range scopes {
			c := counted[storage.ThrottleKey(scope)]
			lastAt := fromMillis(c.lastAt)
			if c.lastAt == 0 || !lastAt.Add(min(t.Forget, throttleMemory)).After(now) {
				continue // forgotten, or never failed
			}
			if end := lastAt.Add(t.Wait(int(c.failures))); end.After(now) && end.After(until) {
				until = end
			}
		}
		if !until.IsZero() {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE login_failures f SET
				failures = CASE WHEN f.last_at <= $1 - p.forget THEN 1 ELSE f.failures + 1 END,
				first_at = CASE WHEN f.last_at <= $1 - p.forget THEN $1 ELSE f.first_at END,
				last_at = $1
			FROM unnest($2::text[], $3::bigint[]) AS p(scope, forget) WHERE f.scope = p.scope`,
			millis(now), stored, forget); err != nil {
			return err
		}
		// Old rows are of no use: keep the table to the scopes seen lately, a few at a
		// time (by index), skipping those another attempt holds.
		_, err = tx.Exec(ctx, `DELETE FROM login_failures WHERE scope IN
			(SELECT scope FROM login_failures WHERE last_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
			millis(now.Add(-throttleMemory)), throttleSweepBatch)
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("login throttle: %w", err)
	}
	return until, nil
}

// LoginSucceeded takes back the attempt LoginAttempt counted, the password being right:
// the scope clear forgets its failures, and each scope in keep has this one attempt
// taken off its count (an address keeps the failures it made for other names).
//
// The scopes' rows are locked first in the order LoginAttempt locks them (bytewise, as
// Go sorts), so that the two never hold one row each while waiting for the other's.
func (db *DB) LoginSucceeded(ctx context.Context, clear string, keep ...string) error {
	clear = storage.ThrottleKey(clear)
	kept := make([]string, len(keep))
	for i, scope := range keep {
		kept[i] = storage.ThrottleKey(scope)
	}
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT FROM login_failures WHERE scope = ANY($1) ORDER BY scope COLLATE "C" FOR UPDATE`,
			append([]string{clear}, kept...)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM login_failures WHERE scope = $1`, clear); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE login_failures SET failures = failures - 1 WHERE scope = ANY($1) AND failures > 0`, kept)
		return err
	})
	if err != nil {
		return fmt.Errorf("login throttle: %w", err)
	}
	return nil
}
