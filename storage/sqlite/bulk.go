package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// previewPart is how many keys of a preview share a transaction. With 1 M claims stored
// on a shared 2-core machine, a delivery arriving during a preview of 50,000 keys
// written in one transaction waited 0.4-0.5 s for the writer; in parts of 1,000, no
// delivery waited more than 50 ms (20 ms with no preview at all).
const previewPart = 1000

// bulkSample is how many keys a preview shows.
const bulkSample = 20

// previewKey is one key a preview found, with what its run checks against.
type previewKey struct {
	storage.BulkKey
	claim     int64
	updatedAt int64
	// first is the claim's first delivery: once the claim is swept, it tells the
	// claim's trace from that of a later claim of the key (Claim.ClaimedAnewSincePreview).
	first int64
}

// CreateBulkPreview finds the keys req's filter matches, leaves out those the action
// cannot act on (counted by reason), and stores the action as a preview with its keys,
// their money per currency and whether a reprocess will need approval. Nothing is
// released until Start. Returns ErrTooManyKeys past MaxBulkKeys; a bad kind, filter or
// reason is an error that names it.
func (db *DB) CreateBulkPreview(ctx context.Context, req storage.BulkRequest) (storage.BulkAction, error) {
	if err := req.Check(); err != nil {
		return storage.BulkAction{}, err
	}
	req.Filter.Currency = storage.CurrencyCode(req.Filter.Currency)
	// As stored, to the millisecond: the action returned is the one read back.
	now := fromMillis(millis(db.Now()))
	query, args := bulkQuery(req)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	defer rows.Close()
	var keys []previewKey
	leftOut := map[string]int{}
	expired := 0
	for rows.Next() {
		var k previewKey
		var expires int64
		var stored bool
		if err := rows.Scan(&k.claim, &k.Source, &k.Key, &k.State, &k.updatedAt, &k.first, &expires, &stored, &k.Amount, &k.Currency); err != nil {
			return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
		}
		if !req.Filter.MatchAmount(k.Amount) {
			continue
		}
		why, isExpired := storage.LeftOutOf(req.Kind, k.State, k.updatedAt >= millis(req.StuckBefore), stored, fromMillis(expires), now)
		switch {
		case why != "":
			leftOut[why]++
		default:
			if isExpired {
				expired++
			}
			if len(keys) == storage.MaxBulkKeys {
				return storage.BulkAction{}, storage.ErrTooManyKeys
			}
			keys = append(keys, k)
		}
	}
	if err := rows.Err(); err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	rows.Close()

	plain := make([]storage.BulkKey, len(keys))
	for i, k := range keys {
		plain[i] = k.BulkKey
	}
	a := storage.BulkAction{Kind: req.Kind, Filter: req.Filter, Reason: req.Reason, RequestedBy: req.Actor, State: storage.BulkPreview,
		Total: len(keys), LeftOut: leftOut, Expired: expired, CreatedAt: now, UpdatedAt: now}
	a.Money, a.NoAmount, a.Unreadable = storage.SumMoney(plain)
	if req.Kind == storage.BulkReprocess && len(req.Thresholds) > 0 {
		earlier, err := reprocessedBy(ctx, db.read, req.Actor, now)
		if err != nil {
			return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
		}
		a.NeedsApproval = len(req.Thresholds.OverWith(a.Money, earlier, a.Unreadable)) > 0
	}
	filter, _ := json.Marshal(a.Filter)
	money, _ := json.Marshal(moneyRecord{a.Money, a.NoAmount, a.Unreadable, a.Expired})
	left, _ := json.Marshal(leftOut)
	if err := db.clearOldPreviews(ctx, now.Add(-storage.MaxPreviewAge)); err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk preview: clearing previews of more than a day ago: %w", err)
	}
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO bulk_actions (kind, filter, reason, requested_by, state, total, money,
			left_out, needs_approval, created_at, updated_at) VALUES (?, ?, ?, ?, 'building', ?, ?, ?, ?, ?, ?)`,
			a.Kind, string(filter), a.Reason, a.RequestedBy, a.Total, string(money), string(left), a.NeedsApproval, millis(now), millis(now))
		if err != nil {
			return err
		}
		a.ID, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	// The keys go in previewPart at a time, each part its own transaction, so that
	// intake waits for one part at most; the action is a preview (listed, startable)
	// only once the last is in.
	for i := 0; i < len(keys) && err == nil; i += previewPart {
		err = db.writeTx(ctx, func(tx *sql.Tx) error {
			const chunk = 100 // rows per INSERT: well under SQLite's limit of variables
			for j := i; j < min(i+previewPart, len(keys)); j += chunk {
				part := keys[j:min(j+chunk, i+previewPart, len(keys))]
				vals := make([]any, 0, len(part)*10)
				for n, k := range part {
					vals = append(vals, a.ID, j+n, k.claim, k.Source, k.Key, k.State, k.updatedAt, k.first, k.Amount, k.Currency)
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO bulk_action_keys (action, seq, claim, source, key, state, updated_at,
					first_delivery, amount, currency) VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?),", len(part)), ","), vals...); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err == nil {
		err = db.writeTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = 'preview' WHERE id = ?`, a.ID)
			return err
		})
	}
	if err != nil {
		// Its keys go with it (ON DELETE CASCADE); a preview the next day clears what a
		// failure here leaves.
		dctx := context.WithoutCancel(ctx)
		if derr := db.writeTx(dctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(dctx, `DELETE FROM bulk_actions WHERE id = ?`, a.ID)
			return err
		}); derr != nil {
			db.log.Warn("removing a preview half written", "action", a.ID, "err", derr)
		}
		return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	return a, nil
}

// ClearOldPreviews deletes the previews never started that are more than
// storage.MaxPreviewAge old, with their keys (storage.RunBulkActions calls it).
func (db *DB) ClearOldPreviews(ctx context.Context) error {
	if err := db.clearOldPreviews(ctx, db.Now().Add(-storage.MaxPreviewAge)); err != nil {
		return fmt.Errorf("clearing previews of more than a day ago: %w", err)
	}
	return nil
}

// clearOldPreviews deletes the previews made before cutoff and never started, of no use
// by then, and any left half written by a process that stopped. They are first made
// "building", so that none is started while its keys go; the keys then go previewPart
// at a time, so that intake waits for one part at most.
func (db *DB) clearOldPreviews(ctx context.Context, cutoff time.Time) error {
	var old []struct{ id, total int64 }
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE bulk_actions SET state = 'building'
			WHERE state IN ('preview', 'building') AND created_at < ? RETURNING id, total`, millis(cutoff))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o struct{ id, total int64 }
			if err := rows.Scan(&o.id, &o.total); err != nil {
				return err
			}
			old = append(old, o)
		}
		return rows.Err()
	})
	for _, o := range old {
		for from := int64(0); from < o.total && err == nil; from += previewPart {
			err = db.writeTx(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `DELETE FROM bulk_action_keys WHERE action = ? AND seq >= ? AND seq < ?`,
					o.id, from, from+previewPart)
				return err
			})
		}
		if err == nil {
			err = db.writeTx(ctx, func(tx *sql.Tx) error {
				// The newest row stays, without its keys and "building", which no look-up
				// reads: SQLite gives a new row the highest id plus one, so the next action
				// would take this one's id, and a page of it left open would start that one.
				if _, err := tx.ExecContext(ctx, `DELETE FROM bulk_actions WHERE id = ?1 AND state = 'building'
					AND id != (SELECT max(id) FROM bulk_actions)`, o.id); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET total = 0 WHERE id = ? AND state = 'building'`, o.id)
				return err
			})
		}
	}
	return err
}

// moneyRecord is how a preview's figures are stored, in its money column: the money,
// and the expired keys among those of a release (BulkAction.Expired).
type moneyRecord struct {
	Money      []storage.MoneyTotal `json:"money"`
	NoAmount   int                  `json:"no_amount"`
	Unreadable int                  `json:"unreadable"`
	Expired    int                  `json:"expired,omitempty"`
}

const bulkColumns = `id, kind, filter, reason, requested_by, state, total, money, left_out, needs_approval,
	done, changed, unchanged, skipped, refused, last_error, decided_by, decision_reason, cancelled_by,
	cancel_requested, created_at, started_at, decided_at, finished_at, updated_at`

func scanBulk(s scanner) (storage.BulkAction, error) {
	var a storage.BulkAction
	var filter, money, left string
	var created, started, decided, finished, updated int64
	err := s.Scan(&a.ID, &a.Kind, &filter, &a.Reason, &a.RequestedBy, &a.State, &a.Total, &money, &left, &a.NeedsApproval,
		&a.Done, &a.Changed, &a.Unchanged, &a.Skipped, &a.Refused, &a.LastError, &a.DecidedBy, &a.DecisionReason,
		&a.CancelledBy, &a.CancelRequested, &created, &started, &decided, &finished, &updated)
	if err != nil {
		return storage.BulkAction{}, err
	}
	var m moneyRecord
	if err := errors.Join(json.Unmarshal([]byte(filter), &a.Filter), json.Unmarshal([]byte(money), &m),
		json.Unmarshal([]byte(left), &a.LeftOut)); err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk action %d: %w", a.ID, err)
	}
	a.Money, a.NoAmount, a.Unreadable, a.Expired = m.Money, m.NoAmount, m.Unreadable, m.Expired
	when := func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		return fromMillis(ms)
	}
	a.CreatedAt, a.StartedAt, a.DecidedAt, a.FinishedAt, a.UpdatedAt = when(created), when(started), when(decided), when(finished), when(updated)
	return a, nil
}

// BulkAction returns the bulk action with id. Returns ErrNotFound if there is none (or
// its preview is still being written).
func (db *DB) BulkAction(ctx context.Context, id int64) (storage.BulkAction, error) {
	a, err := scanBulk(db.read.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = ? AND state != 'building'`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return storage.BulkAction{}, fmt.Errorf("bulk action %d: %w", id, storage.ErrNotFound)
	}
	if err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk action %d: %w", id, err)
	}
	return a, nil
}

// BulkActions returns up to limit bulk actions with an id below before (0: from the
// newest), newest first: those in state, or all of them when state is "".
func (db *DB) BulkActions(ctx context.Context, state string, before int64, limit int) ([]storage.BulkAction, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	q := `SELECT ` + bulkColumns + ` FROM bulk_actions WHERE state = ? AND id < ? ORDER BY id DESC LIMIT ?`
	args := []any{state, before, limit}
	if state == "" {
		q, args = `SELECT `+bulkColumns+` FROM bulk_actions WHERE state != 'building' AND id < ? ORDER BY id DESC LIMIT ?`, []any{before, limit}
	}
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("bulk actions: %w", err)
	}
	defer rows.Close()
	var out []storage.BulkAction
	for rows.Next() {
		a, err := scanBulk(rows)
		if err != nil {
			return nil, fmt.Errorf("bulk actions: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// CountBulkActions returns how many bulk actions are in state, or how many there are
// when state is "" (a preview still being written is none yet).
func (db *DB) CountBulkActions(ctx context.Context, state string) (int, error) {
	q, args := `SELECT count(*) FROM bulk_actions WHERE state = ?`, []any{state}
	if state == "" {
		q, args = `SELECT count(*) FROM bulk_actions WHERE state != 'building'`, nil
	}
	var n int
	if err := db.read.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count bulk actions: %w", err)
	}
	return n, nil
}

// BulkKeys returns the first limit keys of a bulk action, in the preview's order, with
// their outcomes so far.
func (db *DB) BulkKeys(ctx context.Context, id int64, limit int) ([]storage.BulkKey, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT source, key, state, amount, currency, outcome FROM bulk_action_keys
		WHERE action = ? ORDER BY seq LIMIT ?`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("keys of bulk action %d: %w", id, err)
	}
	defer rows.Close()
	var out []storage.BulkKey
	for rows.Next() {
		var k storage.BulkKey
		if err := rows.Scan(&k.Source, &k.Key, &k.State, &k.Amount, &k.Currency, &k.Outcome); err != nil {
			return nil, fmt.Errorf("keys of bulk action %d: %w", id, err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// BulkSample returns the keys a preview shows.
func (db *DB) BulkSample(ctx context.Context, id int64) ([]storage.BulkKey, error) {
	return db.BulkKeys(ctx, id, bulkSample)
}

// BulkSources returns the sources of a bulk action's keys, each once, sorted: read
// from its keys without them, of which it may hold MaxBulkKeys.
func (db *DB) BulkSources(ctx context.Context, id int64) ([]string, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT DISTINCT source FROM bulk_action_keys WHERE action = ? ORDER BY source`, id)
	if err != nil {
		return nil, fmt.Errorf("sources of bulk action %d: %w", id, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("sources of bulk action %d: %w", id, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sources of bulk action %d: %w", id, err)
	}
	return out, nil
}

// bulkTx loads action id inside tx, runs fn on it and writes the audit row fn returns
// (none when its Action is ""). fn's error rolls everything back.
func (db *DB) bulkTx(ctx context.Context, id int64, fn func(tx *sql.Tx, a *storage.BulkAction, now time.Time) (storage.AuditEntry, error)) (storage.BulkAction, error) {
	var out storage.BulkAction
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		a, err := scanBulk(tx.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = ? AND state != 'building'`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return storage.ErrNotFound
		}
		if err != nil {
			return err
		}
		// As stored, to the millisecond: the action returned is the one read back.
		now := fromMillis(millis(db.Now()))
		e, err := fn(tx, &a, now)
		if err != nil {
			return err
		}
		a.UpdatedAt = now
		if e.Action != "" {
			e.At = now
			if err := db.insertAudit(ctx, tx, e); err != nil {
				return err
			}
		}
		out = a
		return nil
	})
	if err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk action %d: %w", id, err)
	}
	return out, nil
}

// StartBulkAction starts a preview on behalf of its requester (ErrNotRequester for
// anyone else): a reprocess whose money is above a threshold, together with what the
// requester reprocessed without approval lately, waits for approval
// (pending_approval), anything else is queued for the runner (a reprocess under t
// counting as reprocessed by the requester). Audited. An *ActorGoneError when actor
// is no longer an operator.
func (db *DB) StartBulkAction(ctx context.Context, id int64, actor string, t storage.ApprovalThresholds) (storage.BulkAction, error) {
	a, err := db.bulkTx(ctx, id, func(tx *sql.Tx, a *storage.BulkAction, now time.Time) (storage.AuditEntry, error) {
		switch {
		case a.State != storage.BulkPreview:
			return storage.AuditEntry{}, fmt.Errorf("start: %w (%s)", storage.ErrBulkState, a.State)
		case actor != a.RequestedBy:
			return storage.AuditEntry{}, storage.ErrNotRequester
		case a.Stale(now):
			return storage.AuditEntry{}, fmt.Errorf("start: %w", storage.ErrPreviewStale)
		}
		// As in decideBulk: a release started is queued at once, and runs under actor's
		// name with no one else's say.
		if err := checkActor(ctx, tx, "start", actor); err != nil {
			return storage.AuditEntry{}, fmt.Errorf("start: %w", err)
		}
		var over []string
		if a.Kind == storage.BulkReprocess && len(t) > 0 {
			var err error
			if over, err = fourEyes(ctx, tx, actor, now, t, a.Money, a.Unreadable); err != nil {
				return storage.AuditEntry{}, fmt.Errorf("start: %w", err)
			}
		}
		a.NeedsApproval = len(over) > 0
		a.State = storage.BulkQueued
		words := a.Describe(a.Reason)
		if a.NeedsApproval {
			a.State = storage.BulkPendingApproval
			words += "; awaits approval: " + strings.Join(over, ", ")
		}
		a.StartedAt = now
		_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = ?, needs_approval = ?, started_at = ?, updated_at = ? WHERE id = ?`,
			a.State, a.NeedsApproval, millis(now), millis(now), a.ID)
		return storage.AuditEntry{Actor: actor, Action: "bulk start", Reason: words}, err
	})
	if err == nil && a.State == storage.BulkQueued {
		db.wakeBulk()
	}
	return a, err
}

// ApproveBulkAction approves an action waiting for approval, which is then queued;
// RefuseBulkAction refuses it for good. Either is audited with its reason (required),
// and returns ErrSelfApproval when actor requested the action, and an
// *ActorGoneError when actor is no longer an operator; an approval returns a
// *RequesterGoneError when the requester is no longer an operator.
func (db *DB) ApproveBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error) {
	return db.decideBulk(ctx, id, actor, reason, true)
}

// RefuseBulkAction refuses an action waiting for approval: see ApproveBulkAction.
func (db *DB) RefuseBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error) {
	return db.decideBulk(ctx, id, actor, reason, false)
}

func (db *DB) decideBulk(ctx context.Context, id int64, actor, reason string, approve bool) (storage.BulkAction, error) {
	reason = strings.TrimSpace(reason)
	verb := map[bool]string{true: "approve", false: "refuse"}[approve]
	switch {
	case reason == "":
		return storage.BulkAction{}, fmt.Errorf("%s bulk action %d: a reason is required: it goes to the audit log", verb, id)
	}
	if err := storage.BulkReasonTooLong(reason); err != nil {
		return storage.BulkAction{}, fmt.Errorf("%s bulk action %d: %w", verb, id, err)
	}
	a, err := db.bulkTx(ctx, id, func(tx *sql.Tx, a *storage.BulkAction, now time.Time) (storage.AuditEntry, error) {
		switch {
		case a.State != storage.BulkPendingApproval:
			return storage.AuditEntry{}, fmt.Errorf("%s: %w (%s)", verb, storage.ErrBulkState, a.State)
		case actor == "" || actor == a.RequestedBy:
			return storage.AuditEntry{}, storage.ErrSelfApproval
		case approve && a.Stale(now):
			// Refusing stays possible: it closes the action.
			return storage.AuditEntry{}, fmt.Errorf("%s: %w", verb, storage.ErrPreviewStale)
		}
		// Read under the transaction's write lock: a role change or removal of the
		// decider or of the requester commits either before it, and is seen, or after
		// the decision. The decider first: one who may no longer decide is told so,
		// rather than asked to refuse.
		if err := checkActor(ctx, tx, "approve or refuse", actor); err != nil {
			return storage.AuditEntry{}, fmt.Errorf("%s: %w", verb, err)
		}
		if approve {
			role, err := userRole(ctx, tx, a.RequestedBy)
			if err != nil {
				return storage.AuditEntry{}, err
			}
			if err := storage.CheckRequester(a.RequestedBy, role); err != nil {
				return storage.AuditEntry{}, fmt.Errorf("%s: %w", verb, err)
			}
		}
		a.State = storage.BulkQueued
		if !approve {
			a.State = storage.BulkRefused
			a.FinishedAt = now
		}
		a.DecidedBy, a.DecisionReason, a.DecidedAt = actor, reason, now
		_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = ?, decided_by = ?, decision_reason = ?, decided_at = ?,
			finished_at = ?, updated_at = ? WHERE id = ?`, a.State, actor, reason, millis(now), millis(a.FinishedAt)*boolInt(!approve),
			millis(now), a.ID)
		return storage.AuditEntry{Actor: actor, Action: "bulk " + verb, Reason: a.Describe(reason)}, err
	})
	if err == nil && approve {
		db.wakeBulk()
	}
	return a, err
}

// userRole returns the role of the user name in tx, or "" when no user has that name.
func userRole(ctx context.Context, tx *sql.Tx, name string) (string, error) {
	var role string
	err := tx.QueryRowContext(ctx, `SELECT role FROM users WHERE name = ?`, name).Scan(&role)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return role, err
}

// checkActor returns a *storage.ActorGoneError unless name may still take verb, a step
// of an action (storage.CheckActor), read in tx: under its write lock, a role change or
// removal commits either before the read, and is seen, or after the step.
func checkActor(ctx context.Context, tx *sql.Tx, verb, name string) error {
	role, err := userRole(ctx, tx, name)
	if err != nil {
		return err
	}
	return storage.CheckActor(verb, name, role)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// CancelBulkAction cancels an action: at once when it has not begun to run, else the
// runner stops before its next batch (the keys done by then stay done). Any operator
// may cancel; it is audited. ErrBulkState for an action that is over, an
// *ActorGoneError when actor is no longer an operator.
func (db *DB) CancelBulkAction(ctx context.Context, id int64, actor, reason string) (storage.BulkAction, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "cancelled"
	}
	if err := storage.BulkReasonTooLong(reason); err != nil {
		return storage.BulkAction{}, fmt.Errorf("cancel bulk action %d: %w", id, err)
	}
	return db.bulkTx(ctx, id, func(tx *sql.Tx, a *storage.BulkAction, now time.Time) (storage.AuditEntry, error) {
		var asked bool
		switch a.State {
		case storage.BulkPreview, storage.BulkPendingApproval, storage.BulkQueued:
			a.State, a.FinishedAt = storage.BulkCancelled, now
		case storage.BulkRunning:
			asked, a.CancelRequested = a.CancelRequested, true
		default:
			return storage.AuditEntry{}, fmt.Errorf("cancel: %w (%s)", storage.ErrBulkState, a.State)
		}
		// As in decideBulk, and before a cancel asked already is answered: that answer
		// would tell someone who may no longer cancel that their cancel holds.
		if err := checkActor(ctx, tx, "cancel", actor); err != nil {
			return storage.AuditEntry{}, fmt.Errorf("cancel: %w", err)
		}
		if asked {
			return storage.AuditEntry{}, nil
		}
		a.CancelledBy = actor
		_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = ?, cancel_requested = ?, cancelled_by = ?,
			finished_at = ?, updated_at = ? WHERE id = ?`, a.State, a.CancelRequested, actor,
			millis(a.FinishedAt)*boolInt(!a.FinishedAt.IsZero()), millis(now), a.ID)
		return storage.AuditEntry{Actor: actor, Action: "bulk cancel", Reason: a.Describe(reason)}, err
	})
}

// wakeBulk tells the runner that an action is ready.
func (db *DB) wakeBulk() {
	select {
	case db.bulkWake <- struct{}{}:
	default:
	}
}

// ClaimBulkAction takes the oldest action ready to run for runner, until now+lease:
// a queued one, or a running one whose runner's lease ran out (it stopped, or the
// process did: the action resumes from its first key without an outcome). Two runners
// never hold one action: the claim is one write transaction, and each batch checks it.
// ok is false when none is ready.
func (db *DB) ClaimBulkAction(ctx context.Context, runner string, lease time.Duration) (id int64, ok bool, err error) {
	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		now := millis(db.Now())
		err := tx.QueryRowContext(ctx, `UPDATE bulk_actions SET state = 'running', runner = ?1, lease_until = ?2, updated_at = ?3
			WHERE id = (SELECT id FROM bulk_actions WHERE state = 'queued' OR (state = 'running' AND lease_until < ?3)
				ORDER BY id LIMIT 1) RETURNING id`, runner, now+lease.Milliseconds(), now).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("claim bulk action: %w", err)
	}
	return id, ok, nil
}

// RunBulkBatch acts on up to n keys of action id that have no outcome yet, in one
// transaction that writes each key's release and audit row (actor: the requester;
// reason: the action's, naming it) and its outcome together, then renews runner's lease.
// A key that changed since the preview is skipped (storage.PreviewedClaim.ChangedSincePreview); one whose
// claim is gone, swept, is released or refused as releasing it alone would. A cancel
// asked for is honoured before any key; with no key left the action is done.
func (db *DB) RunBulkBatch(ctx context.Context, id int64, runner string, stuckBefore time.Time, n int, lease time.Duration) (storage.BulkBatch, error) {
	var out storage.BulkBatch
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		out = storage.BulkBatch{}
		a, err := scanBulk(tx.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = ?`, id))
		if err != nil {
			return err
		}
		var holder string
		if err := tx.QueryRowContext(ctx, `SELECT runner FROM bulk_actions WHERE id = ?`, id).Scan(&holder); err != nil {
			return err
		}
		now := db.Now()
		if a.State != storage.BulkRunning || holder != runner {
			out.Over = true
			return nil
		}
		if a.CancelRequested {
			out.Over = true
			_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = 'cancelled', finished_at = ?1, updated_at = ?1
				WHERE id = ?2`, millis(now), id)
			return err
		}
		// Keys are done in order, each batch whole, so the first a.Done have their
		// outcome: starting there keeps each batch's look-up short in a long action.
		rows, err := tx.QueryContext(ctx, `SELECT seq, claim, source, key, state, updated_at, first_delivery FROM bulk_action_keys
			WHERE action = ? AND seq >= ? AND outcome = '' ORDER BY seq LIMIT ?`, id, a.Done, n)
		if err != nil {
			return err
		}
		var batch []bulkKeyTodo
		for rows.Next() {
			var k bulkKeyTodo
			if err := rows.Scan(&k.seq, &k.ID, &k.source, &k.key, &k.State, &k.UpdatedAt, &k.First); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(batch) == 0 {
			out.Over = true
			_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = 'done', finished_at = ?1, updated_at = ?1,
				last_error = '' WHERE id = ?2`, millis(now), id)
			return err
		}
		var tally storage.BulkTally
		for _, k := range batch {
			c, err := scanClaim(tx.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE source = ? AND key = ?`, k.source, k.key))
			found := err == nil
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			outcome, err := storage.ActOnBulkKey(a, k.source, k.key, k.PreviewedClaim, c, found,
				func() (storage.Claim, error) { return sweptClaim(ctx, tx, k.source, k.key) },
				func(r storage.Release, checked int64) (storage.Released, error, error) {
					return db.releaseIn(ctx, tx, r, checked)
				},
				stuckBefore)
			if err != nil {
				return err
			}
			tally.Add(outcome)
			if _, err := tx.ExecContext(ctx, `UPDATE bulk_action_keys SET outcome = ? WHERE action = ? AND seq = ?`, outcome, id, k.seq); err != nil {
				return err
			}
		}
		out.Changed = tally.Changed
		_, err = tx.ExecContext(ctx, `UPDATE bulk_actions SET done = done + ?, changed = changed + ?, unchanged = unchanged + ?,
			skipped = skipped + ?, refused = refused + ?, lease_until = ?, updated_at = ?, last_error = '' WHERE id = ?`,
			len(batch), tally.Changed, tally.Unchanged, tally.Skipped, tally.Refused, millis(now.Add(lease)), millis(now), id)
		return err
	})
	if err != nil {
		return storage.BulkBatch{}, fmt.Errorf("bulk action %d: %w", id, err)
	}
	return out, nil
}

// bulkKeyTodo is a key of a running action without an outcome, as its preview saw it.
type bulkKeyTodo struct {
	seq         int64
	source, key string
	storage.PreviewedClaim
}

// NoteBulkError keeps the last failure of a running action, for its page, unless
// another runner holds the action by now.
func (db *DB) NoteBulkError(ctx context.Context, id int64, runner string, failure error) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET last_error = ?, updated_at = ? WHERE id = ? AND runner = ?`,
			failure.Error(), millis(db.Now()), id, runner)
		return err
	})
}

// bulkQuery selects the claims req's filter matches, oldest first, with what a preview
// needs of each: whether its payload is stored, and its first delivery's amount.
func bulkQuery(req storage.BulkRequest) (string, []any) {
	f, stuckBefore := req.Filter, req.StuckBefore
	where := []string{"1 = 1"}
	var args []any
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if f.Source != "" {
		add("c.source = ?", f.Source)
	}
	if sources := req.SourcesSearched(); len(sources) > 0 {
		in := make([]any, len(sources))
		for i, s := range sources {
			in[i] = s
		}
		add("c.source IN ("+placeholders(len(in))+")", in...)
	}
	if f.Key != "" {
		add("c.key = ?", f.Key)
	}
	if f.State != "" {
		add("c.state = ?", f.State)
	}
	if f.Stuck {
		add("c.state IN ('processing', 'failed') AND (c.state = 'failed' OR c.updated_at < ?)", millis(stuckBefore))
	}
	if !f.From.IsZero() {
		add("c.claimed_at >= ?", millis(f.From))
	}
	if !f.To.IsZero() {
		add("c.claimed_at < ?", millis(f.To))
	}
	if f.Property != "" {
		add("d.property = ?", f.Property)
	}
	if f.Booking != "" {
		add("d.booking = ?", f.Booking)
	}
	if f.Status != "" {
		add("d.event_status = ?", f.Status)
	}
	if f.Currency != "" {
		add("d.currency = ?", storage.CurrencyCode(f.Currency))
	}
	// Flags are few: the keys are found from the suspects, through their deliveries and
	// the claims' index on (source, key), and only a suspect of the key's first delivery
	// counts. Checked per claim instead, every claim would be read.
	if f.Flag != "" || f.FlagState != "" {
		cond, a := "(c.source, c.key, c.first_delivery) IN (SELECT fd.source, fd.key, fd.id FROM suspects s JOIN deliveries fd ON fd.id = s.delivery WHERE 1 = 1", []any{}
		if f.Flag != storage.FlagAny && f.Flag != "" {
			cond, a = cond+" AND s.kind = ?", append(a, string(f.Flag))
		}
		if f.FlagState != "" {
			cond, a = cond+" AND s.state = ?", append(a, f.FlagState)
		}
		add(cond+")", a...)
	}
	return `SELECT c.id, c.source, c.key, c.state, c.updated_at, c.first_delivery, c.expires_at,
	coalesce(d.source = c.source AND d.key = c.key, 0), coalesce(d.amount, ''), coalesce(d.currency, '')
FROM claims c LEFT JOIN deliveries d ON d.id = c.first_delivery
WHERE ` + strings.Join(where, " AND ") + ` ORDER BY c.id`, args
}
