package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBusy means a key is being handed downstream right now and is not stuck yet:
// releasing it could dispatch its event twice.
var ErrBusy = errors.New("key is processing and not stuck")

// ErrPayloadGone means a key cannot be reprocessed: the payload that reprocessing would
// send again is no longer stored (retention removed it once the key was released,
// expired, or settled without a hand-off). Releasing the key still works: its next
// delivery is then accepted, with its own payload.
var ErrPayloadGone = errors.New("its payload is no longer stored")

// Release asks for a key to be released.
type Release struct {
	Source, Key string
	Actor       string // who asks, for the audit log
	Reason      string // required
	// Reprocess dispatches the stored payload again now and keeps the key claimed,
	// instead of freeing the key for its next delivery.
	Reprocess bool
	// StuckBefore: a key processing since before this time is stuck and may be released.
	StuckBefore time.Time
	// Thresholds, when set, refuse a reprocess whose keys' money is above them
	// (NeedsApprovalError) before any key changes: a second operator approves such a
	// reprocess, as a bulk action. Without them a reprocess of one key, or of a set,
	// would go round four-eyes.
	Thresholds ApprovalThresholds
}

// NeedsApprovalError is the refusal of a reprocess whose money is above
// Release.Thresholds; Over says by how much, a line per currency
// (ApprovalThresholds.Over).
type NeedsApprovalError struct{ Over []string }

func (e *NeedsApprovalError) Error() string {
	return "reprocess needs a second operator's approval: " + strings.Join(e.Over, ", ")
}

// checkReprocessMoney returns a NeedsApprovalError when r is a reprocess whose keys'
// money, read from each claim's first delivery (the payload sent again), is above
// r.Thresholds. Every named key counts, also one that the release will then refuse.
// The amounts are read before the release's transactions: a key claimed anew in
// between is in flight, which a release refuses.
func (db *DB) checkReprocessMoney(ctx context.Context, keys []KeyRef, r Release) error {
	if !r.Reprocess || len(r.Thresholds) == 0 {
		return nil
	}
	stmt, err := db.read.PrepareContext(ctx, `SELECT coalesce(d.amount, ''), coalesce(d.currency, '')
		FROM claims c LEFT JOIN deliveries d ON d.id = c.first_delivery WHERE c.source = ? AND c.key = ?`)
	if err != nil {
		return fmt.Errorf("reprocess: the money of its keys: %w", err)
	}
	defer stmt.Close()
	money := make([]BulkKey, 0, len(keys))
	for _, k := range keys {
		var b BulkKey
		err := stmt.QueryRowContext(ctx, k.Source, k.Key).Scan(&b.Amount, &b.Currency)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reprocess: the money of %s/%s: %w", k.Source, k.Key, err)
		}
		money = append(money, b)
	}
	sums, _, unreadable := sumMoney(money)
	if over := r.Thresholds.Over(sums, unreadable); len(over) > 0 {
		return &NeedsApprovalError{Over: over}
	}
	return nil
}

// Released says what a release did.
type Released struct {
	Previous string // the key's state before
	Changed  bool   // false when the key was already free: nothing was written
}

// ReleaseKey releases (or reprocesses) one key and writes the audit row in the same
// transaction. Returns ErrNotFound for an unknown key, ErrBusy for a key in flight and
// ErrPayloadGone for a reprocess whose payload is no longer stored (RefusalOf names
// the refusal each stands for), and a *NeedsApprovalError for a reprocess whose money
// is above r.Thresholds; a release without a reason is an error.
// Releasing a key that is already free changes nothing and reports Changed false.
func (db *DB) ReleaseKey(ctx context.Context, r Release) (Released, error) {
	if r.Reason == "" {
		return Released{}, fmt.Errorf("release %s/%s: a reason is required", r.Source, r.Key)
	}
	if err := db.checkReprocessMoney(ctx, []KeyRef{{r.Source, r.Key}}, r); err != nil {
		return Released{}, err
	}
	var out Released
	var refused, failed error
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		out, refused, failed = db.releaseIn(ctx, tx, r)
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
		return Released{}, failed // it names the key already
	case err != nil:
		return Released{}, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	return out, nil
}

// errRefused rolls back the transaction of a release that was refused.
var errRefused = errors.New("refused")

// releaseIn releases one key inside tx. A refusal (no such key, a key in flight, a
// reprocess without a payload) comes back as refused, wrapping ErrNotFound, ErrBusy or
// ErrPayloadGone, with nothing written; err means the transaction failed and must be
// rolled back. The caller has checked that r has a reason.
func (db *DB) releaseIn(ctx context.Context, tx *sql.Tx, r Release) (out Released, refused, err error) {
	c, err := scanClaim(tx.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE source = ? AND key = ?`, r.Source, r.Key))
	if errors.Is(err, sql.ErrNoRows) {
		return Released{}, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, ErrNotFound), nil
	}
	if err != nil {
		return Released{}, nil, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	now := db.Now()
	out = Released{Previous: c.State}
	if !c.ExpiresAt.After(now) && c.State != StateProcessing {
		out.Previous = "expired"
	}
	free := out.Previous == StateReleased || out.Previous == "expired"
	if free && !r.Reprocess {
		return out, nil, nil
	}
	if c.State == StateProcessing && !c.UpdatedAt.Before(r.StuckBefore) {
		return out, fmt.Errorf("release %s/%s: %w (processing since %s)", r.Source, r.Key, ErrBusy, c.UpdatedAt.Format(time.RFC3339)), nil
	}
	action := "release"
	if r.Reprocess {
		action = "reprocess"
		// The payload is checked here, in the transaction that queues the key, so that no
		// sweep can remove it in between (a processing key's payload is kept: sweep.go).
		// Without it the dispatcher could only fail the key.
		gone, perr := payloadGone(ctx, tx, c)
		if perr != nil {
			return Released{}, nil, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, perr)
		}
		if gone != "" {
			return out, fmt.Errorf("release %s/%s: cannot reprocess: %w (%s); release the key instead, so that its next delivery is accepted",
				r.Source, r.Key, ErrPayloadGone, gone), nil
		}
		// Reprocessing claims the key again for as long as its first claim lasted.
		expires := c.ExpiresAt
		if !expires.After(now) {
			expires = now.Add(c.ExpiresAt.Sub(c.ClaimedAt))
		}
		_, err = tx.ExecContext(ctx, `UPDATE claims SET state = 'processing', attempts = 0, last_error = '',
			next_attempt_at = ?1, updated_at = ?1, expires_at = ?2 WHERE id = ?3`, millis(now), millis(expires), c.ID)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE claims SET state = 'released', next_attempt_at = NULL, updated_at = ?
			WHERE id = ?`, millis(now), c.ID)
		if err == nil {
			// Freed on purpose, the key's next delivery is no late duplicate: not of
			// this claim (a released claim leaves no trace), nor of one that expired
			// before it and left a trace.
			_, err = tx.ExecContext(ctx, `DELETE FROM key_traces WHERE source = ? AND key_hash = ?`, c.Source, KeyHash(c.Key))
		}
		if err == nil {
			// Nor is a re-send of its event under a new id a double of it, to be
			// flagged or, with business_key_blocks, blocked (never handed downstream)
			// for as long as the business window lasts: its business key is forgotten.
			// The key was stored as the claim was won, seen when it was claimed, so the
			// index of seen times finds it in one seek.
			_, err = tx.ExecContext(ctx, `DELETE FROM business_keys WHERE seen_at = ? AND delivery = ?`,
				millis(c.ClaimedAt), c.FirstDelivery)
		}
	}
	if err != nil {
		return Released{}, nil, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	if err := db.insertAudit(ctx, tx, AuditEntry{At: now, Actor: r.Actor, Action: action, Source: r.Source, Key: r.Key,
		Reason: r.Reason, PreviousState: out.Previous}); err != nil {
		return Released{}, nil, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	out.Changed = true
	return out, nil, nil
}

// payloadGone says why c's payload cannot be sent again, or "" when it can: the
// delivery its claim names must be stored, and be of c's own source and key.
func payloadGone(ctx context.Context, tx *sql.Tx, c Claim) (string, error) {
	var source, key string
	err := tx.QueryRowContext(ctx, `SELECT source, key FROM deliveries WHERE id = ?`, c.FirstDelivery).Scan(&source, &key)
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

// maxKeysPerBulkRelease bounds the keys one ReleaseKeys call releases; a larger set is
// released in several calls.
const maxKeysPerBulkRelease = 10000

// releaseBatch is how many keys of a bulk release share a transaction: 50 keys hold the
// write connection about 5 ms, like one of intake's batches, so 10,000 keys under full
// intake load take 1.1-1.3 s (11.3 s at one key per transaction) and raise intake's p99
// by a fifth at most (100 keys raise it by half).
const releaseBatch = 50

// KeyOutcome is what a bulk release did to one key.
type KeyOutcome struct {
	Source, Key string
	Released
	Refused Refusal // "" unless the key was left as it was (then Changed is false)
}

// Refusal is why a release left a key as it was. The set is fixed so that every
// reader (console, API, CLI) can say why in words written for them (Message), never
// in an internal error's text.
type Refusal string

const (
	// RefusedBusy: the key is being handed downstream and is not stuck yet (ErrBusy).
	RefusedBusy Refusal = "busy"
	// RefusedNotFound: there is no such key, or it expired and was swept (ErrNotFound).
	RefusedNotFound Refusal = "not found"
	// RefusedPayloadGone: a reprocess whose payload is no longer stored
	// (ErrPayloadGone).
	RefusedPayloadGone Refusal = "payload gone"
)

// RefusalOf returns the refusal that err, from ReleaseKey, stands for; ok is false
// when err is nil or a failure (a bad request, the database) rather than a refusal.
func RefusalOf(err error) (r Refusal, ok bool) {
	switch {
	case errors.Is(err, ErrBusy):
		return RefusedBusy, true
	case errors.Is(err, ErrPayloadGone):
		return RefusedPayloadGone, true
	case errors.Is(err, ErrNotFound):
		return RefusedNotFound, true
	}
	return "", false
}

// Message says why the key was left as it was, for the person who asked for the
// release; it reads after the key's name ("ota/evt_1: no such key").
func (r Refusal) Message() string {
	switch r {
	case RefusedBusy:
		return "in flight: being handed downstream and not stuck yet; try again later"
	case RefusedNotFound:
		return "no such key"
	case RefusedPayloadGone:
		return "cannot reprocess: its payload is no longer stored (past the retention period); " +
			"release the key instead, so that its next delivery is accepted"
	}
	return "refused"
}

// ReleaseSummary is what a bulk release did, counted as the console, the API and the
// CLI report it.
type ReleaseSummary struct {
	Matched   int // the keys the release acted on
	Changed   int // released, or (with Reprocess) queued to be dispatched again
	Unchanged int // already free: nothing written
	Refused   int // left as they were, for one of the reasons in Refusals
	// Refusals counts the refused keys by reason.
	Refusals map[Refusal]int
}

// Summarize sums up the outcomes of ReleaseKeys or ReleaseEach.
func Summarize(outcomes []KeyOutcome) ReleaseSummary {
	s := ReleaseSummary{Matched: len(outcomes), Refusals: map[Refusal]int{}}
	for _, o := range outcomes {
		switch {
		case o.Refused != "":
			s.Refused++
			s.Refusals[o.Refused]++
		case o.Changed:
			s.Changed++
		default:
			s.Unchanged++
		}
	}
	return s
}

// ReleaseKeys releases (or reprocesses) every key matching f, at most 10,000, each with
// its own audit row as ReleaseKey does, committed releaseBatch keys at a time. A key
// refused (in flight, gone meanwhile) gets its Refused reason and the others go on; a
// failed transaction ends the call with its error, and the outcomes committed before
// it. r's Source and Key are ignored; a release without a reason is an error. It stops
// early only if ctx ends.
func (db *DB) ReleaseKeys(ctx context.Context, f KeyFilter, r Release) ([]KeyOutcome, error) {
	f.Limit = maxKeysPerBulkRelease
	f.Before = 0
	claims, err := db.ListKeys(ctx, f)
	if err != nil {
		return nil, err
	}
	keys := make([]KeyRef, len(claims))
	for i, c := range claims {
		keys[i] = KeyRef{Source: c.Source, Key: c.Key}
	}
	return db.ReleaseEach(ctx, keys, r)
}

// KeyRef names a key.
type KeyRef struct{ Source, Key string }

// ReleaseEach releases (or reprocesses) each of keys as ReleaseKeys does: one outcome
// per key, in order, committed releaseBatch keys at a time. r's Source and Key are
// ignored; a release without a reason is an error, and a reprocess whose keys' money is
// above r.Thresholds a *NeedsApprovalError, with no key changed.
func (db *DB) ReleaseEach(ctx context.Context, keys []KeyRef, r Release) ([]KeyOutcome, error) {
	if r.Reason == "" {
		return nil, errors.New("bulk release: a reason is required")
	}
	if err := db.checkReprocessMoney(ctx, keys, r); err != nil {
		return nil, err
	}
	out := make([]KeyOutcome, 0, len(keys))
	for len(keys) > 0 {
		batch := keys[:min(releaseBatch, len(keys))]
		keys = keys[len(batch):]
		done, err := db.releaseBatch(ctx, batch, r)
		if err != nil {
			return out, err
		}
		out = append(out, done...)
	}
	return out, nil
}

func (db *DB) releaseBatch(ctx context.Context, batch []KeyRef, r Release) ([]KeyOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []KeyOutcome
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		out = make([]KeyOutcome, 0, len(batch))
		for _, c := range batch {
			one := r
			one.Source, one.Key = c.Source, c.Key
			res, refused, err := db.releaseIn(ctx, tx, one)
			if err != nil {
				return err
			}
			o := KeyOutcome{Source: c.Source, Key: c.Key, Released: res}
			if refused != nil {
				why, ok := RefusalOf(refused)
				if !ok {
					return refused // releaseIn refuses only for the reasons RefusalOf knows
				}
				o.Refused = why
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bulk release: %w", err)
	}
	return out, nil
}
