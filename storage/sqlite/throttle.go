package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// throttleMemory is how long a scope's failures are kept at most.
const throttleMemory = 24 * time.Hour

// LoginAttempt reserves a password check against scopes at now. When none of them has
// to wait, it counts the attempt as a failure of each, before the password is checked,
// and returns zero: concurrent attempts are counted one after the other, so a burst of
// them cannot all pass while the first is being checked. A right password takes the
// count back with LoginSucceeded. When a scope has to wait, it counts nothing and returns
// until when the longest wait lasts. A scope whose last failure is older than its
// policy's Forget starts counting again. A scope's row is keyed by its
// storage.ThrottleKey, never by the scope as given.
func (db *DB) LoginAttempt(ctx context.Context, now time.Time, scopes map[string]storage.Throttle) (time.Time, error) {
	keyed := make(map[string]storage.Throttle, len(scopes))
	for scope, t := range scopes {
		keyed[storage.ThrottleKey(scope)] = t
	}
	var until time.Time
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		until = time.Time{}
		for key, t := range keyed {
			var failures, last int64
			err := tx.QueryRowContext(ctx, `SELECT failures, last_at FROM login_failures WHERE scope = ?`, key).
				Scan(&failures, &last)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			lastAt := fromMillis(last)
			if !lastAt.Add(min(t.Forget, throttleMemory)).After(now) {
				continue // forgotten
			}
			if end := lastAt.Add(t.Wait(int(failures))); end.After(now) && end.After(until) {
				until = end
			}
		}
		if !until.IsZero() {
			return nil
		}
		for key, t := range keyed {
			_, err := tx.ExecContext(ctx, `INSERT INTO login_failures (scope, failures, first_at, last_at) VALUES (?1, 1, ?2, ?2)
			ON CONFLICT (scope) DO UPDATE SET
				failures = CASE WHEN last_at <= ?2 - ?3 THEN 1 ELSE failures + 1 END,
				first_at = CASE WHEN last_at <= ?2 - ?3 THEN ?2 ELSE first_at END,
				last_at = ?2`, key, millis(now), min(t.Forget, throttleMemory).Milliseconds())
			if err != nil {
				return err
			}
		}
		// Old rows are of no use: keep the table to the scopes seen lately (by index).
		_, err := tx.ExecContext(ctx, `DELETE FROM login_failures WHERE last_at < ?`, millis(now.Add(-throttleMemory)))
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
func (db *DB) LoginSucceeded(ctx context.Context, clear string, keep ...string) error {
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_failures WHERE scope = ?`, storage.ThrottleKey(clear)); err != nil {
			return err
		}
		for _, scope := range keep {
			if _, err := tx.ExecContext(ctx, `UPDATE login_failures SET failures = failures - 1 WHERE scope = ? AND failures > 0`,
				storage.ThrottleKey(scope)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("login throttle: %w", err)
	}
	return nil
}
