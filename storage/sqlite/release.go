package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
	stmt, err := db.read.PrepareContext(ctx, `SELECT coalesce(d.amount, ''), coalesce(d.currency, ''), coalesce(c.first_delivery, 0)
		FROM claims c LEFT JOIN deliveries d ON d.id = c.first_delivery WHERE c.source = ? AND c.key = ?`)
	if err != nil {
		return nil, nil, fmt.Errorf("reprocess: the money of its keys: %w", err)
	}
	defer stmt.Close()
	money := make([]storage.BulkKey, len(keys))
	firsts := make([]int64, len(keys))
	for i, k := range keys {
		err := stmt.QueryRowContext(ctx, k.Source, k.Key).Scan(&money[i].Amount, &money[i].Currency, &firsts[i])
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, nil, fmt.Errorf("reprocess: the money of %s/%s: %w", k.Source, k.Key, err)
		}
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
func (db *DB) checkReprocessMoney(ctx context.Context, tx *sql.Tx, r storage.Release, money []storage.BulkKey) error {
	if money == nil { // not a reprocess under thresholds, or a batch after the first
		return nil
	}
	sums, _, unreadable := storage.SumMoney(money)
	over, err := fourEyes(ctx, tx, r.Actor, db.Now(), r.Thresholds, sums, unreadable)
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
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
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
func (db *DB) releaseIn(ctx context.Context, tx *sql.Tx, r storage.Release, checked int64) (out storage.Released, refused, err error) {
	return storage.ReleaseIn(ctx, releaseTx{db, tx}, r, checked)
}

// releaseTx is a release's transaction as storage.ReleaseIn uses it. SQLite's one
// writer holds every key against other writers.
type releaseTx struct {
	db *DB
	tx *sql.Tx
}

func (t releaseTx) Now() time.Time { return t.db.Now() }

func (t releaseTx) LockedClaim(ctx context.Context, source, key string) (storage.Claim, bool, error) {
	c, err := scanClaim(t.tx.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE source = ? AND key = ?`, source, key))
	if errors.Is(err, sql.ErrNoRows) {
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
	_, err := t.tx.ExecContext(ctx, `UPDATE claims SET state = 'processing', attempts = 0, last_error = '',
	next_attempt_at = ?5, updated_at = ?1, expires_at = ?2, ttl = ?3 WHERE id = ?4`,
		millis(now), millis(expires), ttl.Milliseconds(), c.ID, millis(storage.NotALease(now, c.LeasedUntil)))
	return err
}

func (t releaseTx) MarkReleased(ctx context.Context, c storage.Claim, now time.Time) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE claims SET state = 'released', next_attempt_at = NULL, updated_at = ?
	WHERE id = ?`, millis(now), c.ID)
	return err
}

func (t releaseTx) Audit(ctx context.Context, e storage.AuditEntry) error {
	return t.db.insertAudit(ctx, t.tx, e)
}

// sqlEarlierAccepted is the accepted deliveries of a key (?1, ?2) that its claim does
// not name, through the index of keys (which leaves out the one the claim names).
const sqlEarlierAccepted = `SELECT id FROM deliveries WHERE source = ?1 AND key = ?2 AND body_from = 0 AND by_claim = 0
	AND outcome = 'accepted'`

func (t releaseTx) RecordInterrupted(ctx context.Context, c storage.Claim, now time.Time) error {
	if !c.Interrupted(now) {
		return nil
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
	VALUES (?, ?, ?, ?, 0, 0, ?, '')`, c.Source, c.Key, c.FirstDelivery, millis(c.LeasedUntil), storage.AttemptInterrupted)
	return err
}

func (t releaseTx) PayloadGone(ctx context.Context, c storage.Claim) (string, error) {
	var source, key string
	err := t.tx.QueryRowContext(ctx, `SELECT source, key FROM deliveries WHERE id = ?`, c.FirstDelivery).Scan(&source, &key)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Sprintf("delivery %d was deleted after the retention period", c.FirstDelivery), nil
	case err != nil:
		return "", fmt.Errorf("payload of delivery %d: %w", c.FirstDelivery, err)
	case source != c.Source || key != c.Key:
		return fmt.Sprintf("delivery %d now holds %s/%s", c.FirstDelivery, source, key), nil
	}
	return "", nil
}

// releaseBatch is how many keys of a bulk release share a transaction: 50 keys hold the
// write connection about 5 ms, like one of intake's batches, so 10,000 keys under full
// intake load take 1.1-1.3 s (11.3 s at one key per transaction) and raise intake's p99
// by a fifth at most (100 keys raise it by half).
const releaseBatch = 50

// ReleaseKeys releases (or reprocesses) every key matching f, at most 10,000, each with
// its own audit row as ReleaseKey does, committed releaseBatch keys at a time. A key
// refused (in flight, gone meanwhile) gets its Refused reason and the others go on; a
// failed transaction ends the call with its error, and the outcomes committed before
// it. r's Source and Key are ignored; a release without a reason is an error. It stops
// early only if ctx ends.
func (db *DB) ReleaseKeys(ctx context.Context, f storage.KeyFilter, r storage.Release) ([]storage.KeyOutcome, error) {
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

// releaseBatch releases batch in one transaction. money is the money of all the
// call's keys for its first batch, which a reprocess under thresholds checks and counts
// before the batch changes anything (checkReprocessMoney), and nil for the others: a
// call is refused whole or not at all. checked is, for each key of batch, the delivery
// whose money was checked, or nil when none was.
func (db *DB) releaseBatch(ctx context.Context, batch []storage.KeyRef, r storage.Release, money []storage.BulkKey, checked []int64) ([]storage.KeyOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []storage.KeyOutcome
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
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
func forget(ctx context.Context, tx *sql.Tx, c storage.Claim) (n int64, err error) {
	var res sql.Result
	// Freed on purpose, the key's next delivery is no late duplicate: not of
	// this claim (a released claim leaves no trace), nor of one that expired
	// before it and left a trace.
	res, err = tx.ExecContext(ctx, `DELETE FROM key_traces WHERE source = ? AND key_hash = ?`, c.Source, storage.KeyHash(c.Key))
	n += affected(res)
	if err == nil {
		// Nor is a re-send of its event under a new id a double of it, to be
		// flagged or, with business_key_blocks, blocked (never handed downstream)
		// for as long as the business window lasts: its business key is forgotten.
		// The key was stored as the claim was won, under its delivery, seen when it
		// was claimed.
		res, err = tx.ExecContext(ctx, `DELETE FROM business_keys WHERE delivery = ? AND seen_at = ?`,
			c.FirstDelivery, millis(c.ClaimedAt))
		n += affected(res)
	}
	if err == nil {
		// Or among the keys not yet moved there (forensics.go), few and unindexed.
		res, err = tx.ExecContext(ctx, `DELETE FROM forensic_keys_pending WHERE rule = '' AND seen_at = ? AND delivery = ?`,
			millis(c.ClaimedAt), c.FirstDelivery)
		n += affected(res)
	}
	if err == nil {
		// The key's earlier accepted deliveries carry the same event, under the same
		// id: a claim that expired and was taken over leaves its delivery's business
		// key behind, which a re-send would otherwise double. The claim no longer
		// names them, so the index of keys finds them.
		res, err = tx.ExecContext(ctx, `DELETE FROM business_keys WHERE delivery IN (`+sqlEarlierAccepted+`)`, c.Source, c.Key)
		n += affected(res)
	}
	if err == nil {
		res, err = tx.ExecContext(ctx, `DELETE FROM forensic_keys_pending WHERE rule = '' AND delivery IN (`+sqlEarlierAccepted+`)`,
			c.Source, c.Key)
		n += affected(res)
	}
	return n, err
}

// affected is res's count of rows, 0 for a failed statement's nil.
func affected(res sql.Result) int64 {
	if res == nil {
		return 0
	}
	n, _ := res.RowsAffected()
	return n
}

// sweptClaim is what is left of the claim of a key expired and swept: its source and
// key, and, from its trace (if it left one), its first delivery and when it was
// claimed, which its business key was stored under.
func sweptClaim(ctx context.Context, tx *sql.Tx, source, key string) (storage.Claim, error) {
	c := storage.Claim{Source: source, Key: key}
	var first, seen int64
	err := tx.QueryRowContext(ctx, `SELECT first_delivery, first_seen FROM key_traces WHERE source = ? AND key_hash = ?`, source, storage.KeyHash(key)).Scan(&first, &seen)
	switch {
	case err == nil:
		c.FirstDelivery, c.ClaimedAt = first, fromMillis(seen)
	case !errors.Is(err, sql.ErrNoRows):
		return storage.Claim{}, err
	}
	return c, nil
}
