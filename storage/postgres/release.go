package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookdedup/hookdedup/storage"
)

// reprocessMoney returns the money of keys that r would send again, in keys' order,
// each read from its claim's first delivery (a key never claimed carries none), and
// those deliveries (0 for a key never claimed); nil unless r is a reprocess under
// thresholds. They are read before the release's transactions: each key's release
// refuses it if its claim names another delivery by then (storage.ClaimedAnew).
func (db *DB) reprocessMoney(ctx context.Context, keys []storage.KeyRef, r storage.Release) ([]storage.BulkKey, []int64, error) {
	if !r.Reprocess || len(r.Thresholds) == 0 {
		return nil, nil, nil
	}
	sources := make([]string, len(keys))
	names := make([]string, len(keys))
	for i, k := range keys {
		if textOK(k.Source, k.Key) { // any other was never claimed
			sources[i], names[i] = k.Source, k.Key
		}
	}
	// One query for every key, a row each in keys' order (a key named twice counts
	// twice, as it would read one by one).
	rows, err := db.pool.Query(ctx, `SELECT coalesce(d.amount, ''), coalesce(d.currency, ''), coalesce(c.first_delivery, 0)
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(source, key, i)
		LEFT JOIN claims AS c ON c.source = k.source AND c.key = k.key
		LEFT JOIN deliveries AS d ON d.id = c.first_delivery
		ORDER BY k.i`, sources, names)
	if err != nil {
		return nil, nil, fmt.Errorf("reprocess: the money of its keys: %w", err)
	}
	money := make([]storage.BulkKey, 0, len(keys))
	firsts := make([]int64, 0, len(keys))
	var b storage.BulkKey
	var first int64
	_, err = pgx.ForEachRow(rows, []any{&b.Amount, &b.Currency, &first}, func() error {
		money, firsts = append(money, b), append(firsts, first)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reprocess: the money of its keys: %w", err)
	}
	if db.moneyRead != nil {
		db.moneyRead()
	}
	return money, firsts, nil
}

// checkReprocessMoney returns a NeedsApprovalError when money, that of the keys r is
// about to reprocess, is above r.Thresholds together with what r.Actor reprocessed
// without approval within storage.ReprocessWindow, and otherwise counts it as
// reprocessed by r.Actor: every key named, also one the release will then refuse (a
// release refused whole rolls the count back with it), inside tx, before any of the
// keys changes (fourEyes).
func (db *DB) checkReprocessMoney(ctx context.Context, tx pgx.Tx, r storage.Release, money []storage.BulkKey) error {
	if money == nil { // not a reprocess under thresholds, or a batch after the first
		return nil
	}
	sums, _, unreadable := storage.SumMoney(money)
	over, err := db.fourEyes(ctx, tx, r.Actor, db.Now(), r.Thresholds, sums, unreadable)
	if err != nil {
		return fmt.Errorf("reprocess: %w", err)
	}
	if len(over) > 0 {
		return &storage.NeedsApprovalError{Over: over}
	}
	return nil
}

// ReleaseKey releases (or reprocesses) one key and writes the audit row in the same
// transaction. Returns ErrNotFound for an unknown key, ErrBusy for a key in flight and
// ErrPayloadGone for a reprocess whose payload is no longer stored (RefusalOf names
// the refusal each stands for); a release without a reason is an error.
// Releasing a key that is already free changes nothing and reports Changed false.
func (db *DB) ReleaseKey(ctx context.Context, r storage.Release) (storage.Released, error) {
	if r.Reason == "" {
		return storage.Released{}, fmt.Errorf("release %s/%s: a reason is required", r.Source, r.Key)
	}
	money, firsts, err := db.reprocessMoney(ctx, []storage.KeyRef{{Source: r.Source, Key: r.Key}}, r)
	if err != nil {
		return storage.Released{}, err
	}
	checked := storage.MoneyNotChecked
	if firsts != nil {
		checked = firsts[0]
	}
	var out storage.Released
	var refused, failed error
	err = db.writeTx(ctx, func(tx pgx.Tx) error {
		if refused = db.checkReprocessMoney(ctx, tx, r, money); refused != nil {
			return errRefused
		}
		out, refused, failed = db.releaseIn(ctx, tx, r, checked)
		switch {
		case failed != nil:
			return failed
		case refused != nil:
			return errRefused // nothing to commit
		}
		return nil
	})
	switch {
	case errors.Is(err, errRefused):
		return out, refused
	case errors.Is(err, storage.ErrWriteTimeout):
		return storage.Released{}, err // failed, which names the key, said as not stored
	case failed != nil:
		return storage.Released{}, failed // it names the key already
	case err != nil:
		return storage.Released{}, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	return out, nil
}

// errRefused rolls back the transaction of a release that was refused.
var errRefused = errors.New("refused")

// releaseIn releases (or reprocesses) one key inside tx, as storage.ReleaseIn does; the
// bulk runner calls it too, for each key of a batch.
func (db *DB) releaseIn(ctx context.Context, tx pgx.Tx, r storage.Release, checked int64) (out storage.Released, refused, err error) {
	if !textOK(r.Source, r.Key) {
		// PostgreSQL's text cannot hold it, so no such key was ever claimed; asked as a
		// parameter it would fail the statement and with it the whole transaction.
		return storage.Released{}, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, storage.ErrNotFound), nil
	}
	// The audit lock (insertAudit's) first, then the key's row: a transaction that
	// releases several keys holds the lock from its first audit row on, and one that
	// locked its next key before waiting for it could deadlock with another holding the
	// lock and waiting for that key. Every release takes them in this order.
	if err := db.lockAudit(ctx, tx); err != nil {
		return storage.Released{}, nil, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	return storage.ReleaseIn(ctx, releaseTx{db, tx}, r, checked)
}

// releaseTx is a release's transaction as storage.ReleaseIn uses it.
type releaseTx struct {
	db *DB
	tx pgx.Tx
}

func (t releaseTx) Now() time.Time { return t.db.Now() }

// LockedClaim reads the key's row FOR UPDATE: another replica's release, lease, attempt
// or takeover of the key waits for this transaction, or this one for it and then reads
// the row as it left it, so that the decision and the write see the same key.
func (t releaseTx) LockedClaim(ctx context.Context, source, key string) (storage.Claim, bool, error) {
	c, err := scanClaim(t.tx.QueryRow(ctx, `SELECT `+claimColumns+` FROM claims WHERE source = $1 AND key = $2 FOR UPDATE`,
		source, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Claim{}, false, nil
	}
	return c, err == nil, err
}

func (t releaseTx) SweptClaim(ctx context.Context, source, key string) (storage.Claim, error) {
	return sweptClaim(ctx, t.tx, source, key)
}

func (t releaseTx) Forget(ctx context.Context, c storage.Claim) (int64, error) {
	return forget(ctx, t.tx, c)
}

func (t releaseTx) Requeue(ctx context.Context, c storage.Claim, now, expires time.Time, ttl time.Duration) error {
	_, err := t.tx.Exec(ctx, `UPDATE claims SET state = 'processing', attempts = 0, last_error = '',
	next_attempt_at = $5, updated_at = $1, expires_at = $2, ttl = $3 WHERE id = $4`,
		millis(now), millis(expires), ttl.Milliseconds(), c.ID, millis(storage.NotALease(now, c.LeasedUntil)))
	return err
}

func (t releaseTx) MarkReleased(ctx context.Context, c storage.Claim, now time.Time) error {
	_, err := t.tx.Exec(ctx, `UPDATE claims SET state = 'released', next_attempt_at = NULL, updated_at = $1
	WHERE id = $2`, millis(now), c.ID)
	return err
}

func (t releaseTx) Audit(ctx context.Context, e storage.AuditEntry) error {
	return t.db.insertAudit(ctx, t.tx, e)
}

func (t releaseTx) RecordInterrupted(ctx context.Context, c storage.Claim, now time.Time) error {
	if !c.Interrupted(now) {
		return nil
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
	VALUES ($1, $2, $3, $4, 0, 0, $5, '')`, c.Source, c.Key, c.FirstDelivery, millis(c.LeasedUntil), storage.AttemptInterrupted)
	return err
}

// PayloadGone reads the delivery FOR KEY SHARE: a retention sweep deleting it right now
// is waited for, and the delivery is then seen gone rather than sent for.
func (t releaseTx) PayloadGone(ctx context.Context, c storage.Claim) (string, error) {
	var source, key string
	err := t.tx.QueryRow(ctx, `SELECT source, key FROM deliveries WHERE id = $1 FOR KEY SHARE`, c.FirstDelivery).Scan(&source, &key)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Sprintf("delivery %d was deleted after the retention period", c.FirstDelivery), nil
	case err != nil:
		return "", fmt.Errorf("payload of delivery %d: %w", c.FirstDelivery, err)
	case source != c.Source || key != c.Key:
		return fmt.Sprintf("delivery %d now holds %s/%s", c.FirstDelivery, source, key), nil
	}
	return "", nil
}

// releaseBatch is how many keys of a bulk release share a transaction, as on SQLite: a
// transaction's row locks and audit lock are held for a few milliseconds, so that
// intake and the other replicas' releases wait no longer than that behind it.
const releaseBatch = 50

// ReleaseKeys releases (or reprocesses) every key matching f, at most 10,000, each with
// its own audit row as ReleaseKey does, committed releaseBatch keys at a time. A key
// refused (in flight, gone meanwhile) gets its Refused reason and the others go on; a
// failed transaction ends the call with its error, and the outcomes committed before
// it. r's Source and Key are ignored; a release without a reason is an error. It stops
// early only if ctx ends.
func (db *DB) ReleaseKeys(ctx context.Context, f storage.KeyFilter, r storage.Release) ([]storage.KeyOutcome, error) {
	if r.Reason == "" {
		return nil, errors.New("bulk release: a reason is required")
	}
	f.Limit = storage.MaxKeysPerRelease
	f.Before = 0
	claims, err := db.ListKeys(ctx, f)
	if err != nil {
		return nil, err
	}
	keys := make([]storage.KeyRef, len(claims))
	for i, c := range claims {
		keys[i] = storage.KeyRef{Source: c.Source, Key: c.Key}
	}
	return db.ReleaseEach(ctx, keys, r)
}

// ReleaseEach releases (or reprocesses) each of keys as ReleaseKeys does: one outcome
// per key, in order, committed releaseBatch keys at a time. r's Source and Key are
// ignored; a release without a reason is an error.
func (db *DB) ReleaseEach(ctx context.Context, keys []storage.KeyRef, r storage.Release) ([]storage.KeyOutcome, error) {
	if r.Reason == "" {
		return nil, errors.New("bulk release: a reason is required")
	}
	money, firsts, err := db.reprocessMoney(ctx, keys, r)
	if err != nil {
		return nil, err
	}
	out := make([]storage.KeyOutcome, 0, len(keys))
	for len(keys) > 0 {
		n := min(releaseBatch, len(keys))
		var checked []int64
		if firsts != nil {
			checked, firsts = firsts[:n], firsts[n:]
		}
		done, err := db.releaseBatch(ctx, keys[:n], r, money, checked)
		if err != nil {
			return out, err
		}
		keys = keys[n:]
		out = append(out, done...)
		money = nil // checked and counted whole with the first batch
	}
	return out, nil
}

// releaseBatch releases each key of batch in one transaction. It may run again from the
// start when PostgreSQL aborts the transaction (writeTx), so it starts its outcomes
// afresh each run. money is the money of all the call's keys for its first batch,
// which a reprocess under thresholds checks and counts before the batch changes
// anything (checkReprocessMoney), and nil for the others: a call is refused whole or
// not at all. checked is, for each key of batch, the delivery whose money was checked,
// or nil when none was.
func (db *DB) releaseBatch(ctx context.Context, batch []storage.KeyRef, r storage.Release, money []storage.BulkKey, checked []int64) ([]storage.KeyOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []storage.KeyOutcome
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		if err := db.checkReprocessMoney(ctx, tx, r, money); err != nil {
			return err
		}
		out = make([]storage.KeyOutcome, 0, len(batch))
		for i, c := range batch {
			one := r
			one.Source, one.Key = c.Source, c.Key
			first := storage.MoneyNotChecked
			if checked != nil {
				first = checked[i]
			}
			res, refused, err := db.releaseIn(ctx, tx, one, first)
			if err != nil {
				return err
			}
			o := storage.KeyOutcome{Source: c.Source, Key: c.Key, Released: res}
			if refused != nil {
				why, ok := storage.RefusalOf(refused)
				if !ok {
					return refused // releaseIn refuses only for the reasons RefusalOf knows
				}
				o.Refused = why
			}
			out = append(out, o)
		}
		return nil
	})
	if over, ok := errors.AsType[*storage.NeedsApprovalError](err); ok {
		return nil, over
	}
	if err != nil {
		return nil, fmt.Errorf("bulk release: %w", err)
	}
	return out, nil
}

// forget deletes what would make c's key's next deliveries doubles: its trace and the
// business keys of its deliveries. It returns how many rows it deleted.
func forget(ctx context.Context, tx pgx.Tx, c storage.Claim) (n int64, err error) {
	var tag pgconn.CommandTag
	// Freed on purpose, the key's next delivery is no late duplicate: not of
	// this claim (a released claim leaves no trace), nor of one that expired
	// before it and left a trace.
	tag, err = tx.Exec(ctx, `DELETE FROM key_traces WHERE source = $1 AND key_hash = $2`, c.Source, storage.KeyHash(c.Key))
	n += tag.RowsAffected()
	if err == nil {
		// Nor is a re-send of its event under a new id a double of it, to be
		// flagged or, with business_key_blocks, blocked (never handed downstream)
		// for as long as the business window lasts: its business key is forgotten.
		// The key was stored as the claim was won, seen when it was claimed, so the
		// index of seen times finds it in one seek.
		tag, err = tx.Exec(ctx, `DELETE FROM business_keys WHERE seen_at = $1 AND delivery = $2`,
			millis(c.ClaimedAt), c.FirstDelivery)
		n += tag.RowsAffected()
	}
	if err == nil {
		// The key's earlier accepted deliveries carry the same event, under the same
		// id: a claim that expired and was taken over leaves its delivery's business
		// key behind, which a re-send would otherwise double. Each was stored seen
		// when its delivery was received.
		tag, err = tx.Exec(ctx, `DELETE FROM business_keys AS b USING deliveries AS d
		WHERE d.source = $1 AND d.key = $2 AND d.outcome = 'accepted' AND b.seen_at = d.received_at AND b.delivery = d.id`,
			c.Source, c.Key)
		n += tag.RowsAffected()
	}
	return n, err
}

// sweptClaim is what is left of the claim of a key expired and swept: its source and
// key, and, from its trace (if it left one), its first delivery and when it was
// claimed, which its business key was stored under.
func sweptClaim(ctx context.Context, tx pgx.Tx, source, key string) (storage.Claim, error) {
	c := storage.Claim{Source: source, Key: key}
	var first, seen int64
	err := tx.QueryRow(ctx, `SELECT first_delivery, first_seen FROM key_traces WHERE source = $1 AND key_hash = $2`, source, storage.KeyHash(key)).Scan(&first, &seen)
	switch {
	case err == nil:
		c.FirstDelivery, c.ClaimedAt = first, fromMillis(seen)
	case !errors.Is(err, pgx.ErrNoRows):
		return storage.Claim{}, err
	}
	return c, nil
}
