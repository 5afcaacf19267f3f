package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
)

// previewPart is how many keys of a preview share a transaction, as in the SQLite
// engine: a preview of 50,000 keys is written, and cleared, a part at a time, so that
// no transaction holds the audit chain or the table's locks for the whole of it, and
// a half-written preview stays "building", which nothing can start.
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
	req.Reason, req.Actor = storage.ReplacedText(req.Reason), storage.ReplacedText(req.Actor)
	req.Filter.Currency = storage.CurrencyCode(req.Filter.Currency)
	// As stored, to the millisecond: the action returned is the one read back.
	now := fromMillis(millis(db.Now()))
	keys, leftOut, expired, err := db.previewKeys(ctx, req, now)
	if err != nil {
		return storage.BulkAction{}, err
	}

	plain := make([]storage.BulkKey, len(keys))
	for i, k := range keys {
		plain[i] = k.BulkKey
	}
	a := storage.BulkAction{Kind: req.Kind, Filter: req.Filter, Reason: req.Reason, RequestedBy: req.Actor, State: storage.BulkPreview,
		Total: len(keys), LeftOut: leftOut, Expired: expired, CreatedAt: now, UpdatedAt: now}
	a.Money, a.NoAmount, a.Unreadable = storage.SumMoney(plain)
	if req.Kind == storage.BulkReprocess && len(req.Thresholds) > 0 {
		earlier, err := reprocessedBy(ctx, db.pool, req.Actor, now)
		if err != nil {
			return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
		}
		a.NeedsApproval = len(req.Thresholds.OverWith(a.Money, earlier, a.Unreadable)) > 0
	}
	// The filter's text may hold what PostgreSQL's text cannot (a NUL byte): JSON
	// escapes it, and Marshal writes invalid UTF-8 as U+FFFD.
	filter, _ := json.Marshal(a.Filter)
	money, _ := json.Marshal(moneyRecord{a.Money, a.NoAmount, a.Unreadable, a.Expired})
	left, _ := json.Marshal(leftOut)
	if err := db.clearOldPreviews(ctx, now.Add(-storage.MaxPreviewAge)); err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk preview: clearing previews of more than a day ago: %w", err)
	}
	err = db.writeTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO bulk_actions (kind, filter, reason, requested_by, state, total, money,
	left_out, needs_approval, created_at, updated_at) VALUES ($1, $2, $3, $4, 'building', $5, $6, $7, $8, $9, $9) RETURNING id`,
			a.Kind, string(filter), a.Reason, a.RequestedBy, a.Total, string(money), string(left), a.NeedsApproval,
			millis(now)).Scan(&a.ID)
	})
	if err != nil {
		return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	// The keys go in previewPart at a time, each part its own transaction; the action
	// is a preview (listed, startable) only once the last is in.
	for i := 0; i < len(keys) && err == nil; i += previewPart {
		part := keys[i:min(i+previewPart, len(keys))]
		err = db.writeTx(ctx, func(tx pgx.Tx) error {
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"bulk_action_keys"},
				[]string{"action", "seq", "claim", "source", "key", "state", "updated_at", "first_delivery", "amount", "currency"},
				pgx.CopyFromSlice(len(part), func(j int) ([]any, error) {
					k := part[j]
					return []any{a.ID, int64(i + j), k.claim, k.Source, k.Key, k.State, k.updatedAt, k.first, k.Amount, k.Currency}, nil
				}))
			return err
		})
	}
	if err == nil {
		err = db.writeTx(ctx, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE bulk_actions SET state = 'preview' WHERE id = $1 AND state = 'building'`, a.ID)
			return err
		})
	}
	if err != nil {
		// A preview the next day clears what a failure here leaves.
		if derr := db.dropPreview(context.WithoutCancel(ctx), a.ID, int64(len(keys))); derr != nil {
			db.log.Warn("removing a preview half written", "action", a.ID, "err", derr)
		}
		return storage.BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	return a, nil
}

// previewKeys reads the keys req's filter matches, in one statement (one snapshot),
// and sorts them into those the action acts on and those it leaves out, by reason,
// counting the expired keys a release acts on (storage.BulkAction.Expired).
func (db *DB) previewKeys(ctx context.Context, req storage.BulkRequest, now time.Time) (keys []previewKey, leftOut map[string]int, expired int, err error) {
	query, args := bulkQuery(req)
	rows, err := db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("bulk preview: %w", err)
	}
	defer rows.Close()
	leftOut = map[string]int{}
	for rows.Next() {
		var k previewKey
		var expires int64
		var stored bool
		if err := rows.Scan(&k.claim, &k.Source, &k.Key, &k.State, &k.updatedAt, &k.first, &expires, &stored, &k.Amount, &k.Currency); err != nil {
			return nil, nil, 0, fmt.Errorf("bulk preview: %w", err)
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
				return nil, nil, 0, storage.ErrTooManyKeys
			}
			keys = append(keys, k)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, fmt.Errorf("bulk preview: %w", err)
	}
	return keys, leftOut, expired, nil
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
// at a time. It is a sweep: the replica that gets bulkRunnerLock picks the previews,
// and another one making a preview meanwhile leaves them to it.
func (db *DB) clearOldPreviews(ctx context.Context, cutoff time.Time) error {
	type oldPreview struct{ id, total int64 }
	var old []oldPreview
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		old = old[:0]
		if mine, err := db.tryLock(ctx, tx, bulkRunnerLock); err != nil || !mine {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE bulk_actions SET state = 'building'
	WHERE state IN ('preview', 'building') AND created_at < $1 RETURNING id, total`, millis(cutoff))
		if err != nil {
			return err
		}
		old, err = pgx.AppendRows(old, rows, func(row pgx.CollectableRow) (oldPreview, error) {
			var o oldPreview
			err := row.Scan(&o.id, &o.total)
			return o, err
		})
		return err
	})
	for _, o := range old {
		if err != nil {
			break
		}
		err = db.dropPreview(ctx, o.id, o.total)
	}
	return err
}

// dropPreview deletes preview id, "building" and of total keys, its keys previewPart at
// a time and then itself. Run twice at once (two replicas clearing), the second finds
// each part gone.
func (db *DB) dropPreview(ctx context.Context, id, total int64) error {
	var err error
	for from := int64(0); from < total && err == nil; from += previewPart {
		err = db.writeTx(ctx, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `DELETE FROM bulk_action_keys WHERE action = $1 AND seq >= $2 AND seq < $3`,
				id, from, from+previewPart)
			return err
		})
	}
	if err == nil {
		err = db.writeTx(ctx, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `DELETE FROM bulk_actions WHERE id = $1 AND state = 'building'`, id)
			return err
		})
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
	a.CreatedAt, a.StartedAt, a.DecidedAt, a.FinishedAt, a.UpdatedAt = fromMillis(created), fromMillis(started),
		fromMillis(decided), fromMillis(finished), fromMillis(updated)
	return a, nil
}

// BulkAction returns the bulk action with id. Returns ErrNotFound if there is none (or
// its preview is still being written).
func (db *DB) BulkAction(ctx context.Context, id int64) (storage.BulkAction, error) {
	a, err := scanBulk(db.pool.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = $1 AND state <> 'building'`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
	q := `SELECT ` + bulkColumns + ` FROM bulk_actions WHERE state = $1 AND id < $2 ORDER BY id DESC LIMIT $3`
	args := []any{storage.ReplacedText(state), before, limitArg(limit)}
	if state == "" {
		q, args = `SELECT `+bulkColumns+` FROM bulk_actions WHERE state <> 'building' AND id < $1 ORDER BY id DESC LIMIT $2`,
			[]any{before, limitArg(limit)}
	}
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("bulk actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.BulkAction, error) { return scanBulk(row) })
	if err != nil {
		return nil, fmt.Errorf("bulk actions: %w", err)
	}
	return out, nil
}

// CountBulkActions returns how many bulk actions are in state, or how many there are
// when state is "" (a preview still being written is none yet).
func (db *DB) CountBulkActions(ctx context.Context, state string) (int, error) {
	q, args := `SELECT count(*) FROM bulk_actions WHERE state = $1`, []any{storage.ReplacedText(state)}
	if state == "" {
		q, args = `SELECT count(*) FROM bulk_actions WHERE state <> 'building'`, nil
	}
	var n int
	if err := db.pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count bulk actions: %w", err)
	}
	return n, nil
}

// BulkKeys returns the first limit keys of a bulk action, in the preview's order, with
// their outcomes so far.
func (db *DB) BulkKeys(ctx context.Context, id int64, limit int) ([]storage.BulkKey, error) {
	rows, err := db.pool.Query(ctx, `SELECT source, key, state, amount, currency, outcome FROM bulk_action_keys
	WHERE action = $1 ORDER BY seq LIMIT $2`, id, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("keys of bulk action %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.BulkKey, error) {
		var k storage.BulkKey
		err := row.Scan(&k.Source, &k.Key, &k.State, &k.Amount, &k.Currency, &k.Outcome)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("keys of bulk action %d: %w", id, err)
	}
	return out, nil
}

// BulkSample returns the keys a preview shows.
func (db *DB) BulkSample(ctx context.Context, id int64) ([]storage.BulkKey, error) {
	return db.BulkKeys(ctx, id, bulkSample)
}

// BulkSources returns the sources of a bulk action's keys, each once, sorted: read
// from its keys without them, of which it may hold MaxBulkKeys. COLLATE "C" sorts as
// SQLite does, by bytes.
func (db *DB) BulkSources(ctx context.Context, id int64) ([]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT source COLLATE "C" FROM bulk_action_keys WHERE action = $1 ORDER BY 1`, id)
	if err != nil {
		return nil, fmt.Errorf("sources of bulk action %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("sources of bulk action %d: %w", id, err)
	}
	return out, nil
}

// bulkTx locks action id's row inside a transaction, runs fn on the action and writes
// the audit row fn returns (none when its Action is ""). The lock makes each change a
// step from the state the action is in, whatever another replica does at once: its
// change waits for this one's commit, and then reads it. fn's error rolls everything
// back.
func (db *DB) bulkTx(ctx context.Context, id int64, fn func(tx pgx.Tx, a *storage.BulkAction, now time.Time) (storage.AuditEntry, error)) (storage.BulkAction, error) {
	var out storage.BulkAction
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		a, err := scanBulk(tx.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = $1 AND state <> 'building' FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
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
	actor = storage.ReplacedText(actor)
	a, err := db.bulkTx(ctx, id, func(tx pgx.Tx, a *storage.BulkAction, now time.Time) (storage.AuditEntry, error) {
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
			if over, err = db.fourEyes(ctx, tx, actor, now, t, a.Money, a.Unreadable); err != nil {
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
		_, err := tx.Exec(ctx, `UPDATE bulk_actions SET state = $1, needs_approval = $2, started_at = $3, updated_at = $3 WHERE id = $4`,
			a.State, a.NeedsApproval, millis(now), a.ID)
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
	actor, reason = storage.ReplacedText(actor), storage.ReplacedText(reason)
	a, err := db.bulkTx(ctx, id, func(tx pgx.Tx, a *storage.BulkAction, now time.Time) (storage.AuditEntry, error) {
		switch {
		case a.State != storage.BulkPendingApproval:
			return storage.AuditEntry{}, fmt.Errorf("%s: %w (%s)", verb, storage.ErrBulkState, a.State)
		case actor == "" || actor == a.RequestedBy:
			return storage.AuditEntry{}, storage.ErrSelfApproval
		case approve && a.Stale(now):
			// Refusing stays possible: it closes the action.
			return storage.AuditEntry{}, fmt.Errorf("%s: %w", verb, storage.ErrPreviewStale)
		}
		// FOR SHARE: a role change or removal of the decider or of the requester on any
		// replica commits either before this read, and is seen, or waits for the
		// decision's commit. The decider first: one who may no longer decide is told
		// so, rather than asked to refuse.
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
		_, err := tx.Exec(ctx, `UPDATE bulk_actions SET state = $1, decided_by = $2, decision_reason = $3, decided_at = $4,
	finished_at = $5, updated_at = $4 WHERE id = $6`, a.State, actor, reason, millis(now), millisOrZero(a.FinishedAt), a.ID)
		return storage.AuditEntry{Actor: actor, Action: "bulk " + verb, Reason: a.Describe(reason)}, err
	})
	if err == nil && approve {
		db.wakeBulk()
	}
	return a, err
}

// userRole returns the role of the user name in tx, or "" when no user has that name,
// and holds their row until tx ends (FOR SHARE): a change of it waits for tx.
func userRole(ctx context.Context, tx pgx.Tx, name string) (string, error) {
	var role string
	err := tx.QueryRow(ctx, `SELECT role FROM users WHERE name = $1 FOR SHARE`, name).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return role, err
}

// checkActor returns a *storage.ActorGoneError unless name may still take verb, a step
// of an action (storage.CheckActor), read in tx and held until it ends (FOR SHARE): a
// role change or removal on any replica commits either before the read, and is seen,
// or waits for the step's commit.
func checkActor(ctx context.Context, tx pgx.Tx, verb, name string) error {
	role, err := userRole(ctx, tx, name)
	if err != nil {
		return err
	}
	return storage.CheckActor(verb, name, role)
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
	actor, reason = storage.ReplacedText(actor), storage.ReplacedText(reason)
	return db.bulkTx(ctx, id, func(tx pgx.Tx, a *storage.BulkAction, now time.Time) (storage.AuditEntry, error) {
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
		_, err := tx.Exec(ctx, `UPDATE bulk_actions SET state = $1, cancel_requested = $2, cancelled_by = $3,
	finished_at = $4, updated_at = $5 WHERE id = $6`, a.State, a.CancelRequested, actor, millisOrZero(a.FinishedAt),
			millis(now), a.ID)
		return storage.AuditEntry{Actor: actor, Action: "bulk cancel", Reason: a.Describe(reason)}, err
	})
}

// wakeBulk tells this replica's runner that an action is ready; the runners of the
// others find it when they next look (BulkRunConfig.Poll).
func (db *DB) wakeBulk() {
	select {
	case db.bulkWake <- struct{}{}:
	default:
	}
}

// ClaimBulkAction takes the oldest action ready to run for runner, until now+lease:
// a queued one, or a running one whose runner's lease ran out (it stopped, or the
// process did: the action resumes from its first key without an outcome). Two runners
// never hold one action: the claim locks the action's row, skipping one that another
// replica is claiming or running a batch of (a batch renews its lease as it commits),
// and each batch checks that the action is still its runner's. ok is false when none
// is ready.
func (db *DB) ClaimBulkAction(ctx context.Context, runner string, lease time.Duration) (id int64, ok bool, err error) {
	runner = storage.ReplacedText(runner)
	err = db.writeTx(ctx, func(tx pgx.Tx) error {
		now := millis(db.Now())
		err := tx.QueryRow(ctx, `UPDATE bulk_actions SET state = 'running', runner = $1, lease_until = $2, updated_at = $3
	WHERE id = (SELECT id FROM bulk_actions WHERE state = 'queued' OR (state = 'running' AND lease_until < $3)
		ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id`, runner, now+lease.Milliseconds(), now).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			ok = false
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
//
// The batch locks the action's row first: a claim by another runner waits for the
// batch to commit (and then finds the lease renewed), and a batch of this runner after
// another took the action over finds it no longer its own. So no key is acted on by
// two runners, and each batch reads the outcomes of every batch committed before it.
// The batch's claims are locked next, all at once and in id order (after the audit
// lock, as a release takes them), so that intake or a release of one of them waits for
// the batch rather than changes the claim between its check and its release.
func (db *DB) RunBulkBatch(ctx context.Context, id int64, runner string, stuckBefore time.Time, n int, lease time.Duration) (storage.BulkBatch, error) {
	runner = storage.ReplacedText(runner)
	var out storage.BulkBatch
	err := db.writeTx(ctx, func(tx pgx.Tx) error {
		out = storage.BulkBatch{}
		var holder string
		err := tx.QueryRow(ctx, `SELECT runner FROM bulk_actions WHERE id = $1 FOR UPDATE`, id).Scan(&holder)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.ErrNotFound
		}
		if err != nil {
			return err
		}
		a, err := scanBulk(tx.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = $1`, id))
		if err != nil {
			return err
		}
		now := db.Now()
		if a.State != storage.BulkRunning || holder != runner {
			out.Over = true
			return nil
		}
		if a.CancelRequested {
			out.Over = true
			_, err := tx.Exec(ctx, `UPDATE bulk_actions SET state = 'cancelled', finished_at = $1, updated_at = $1
	WHERE id = $2`, millis(now), id)
			return err
		}
		batch, err := bulkTodo(ctx, tx, id, a.Done, n)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			out.Over = true
			_, err := tx.Exec(ctx, `UPDATE bulk_actions SET state = 'done', finished_at = $1, updated_at = $1,
	last_error = '' WHERE id = $2`, millis(now), id)
			return err
		}
		// The audit lock before the claims, as every release takes them (releaseIn):
		// the batch writes an audit row per key, and holding its claims while waiting
		// for the lock could deadlock with a release of several keys holding it.
		if err := db.lockAudit(ctx, tx); err != nil {
			return err
		}
		claims, err := lockClaims(ctx, tx, batch)
		if err != nil {
			return err
		}
		var tally storage.BulkTally
		seqs := make([]int64, len(batch))
		outcomes := make([]string, len(batch))
		for i, k := range batch {
			c, found := claims[[2]string{k.source, k.key}]
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
			seqs[i], outcomes[i] = k.seq, outcome
		}
		_, err = tx.Exec(ctx, `UPDATE bulk_action_keys AS k SET outcome = o.outcome
	FROM unnest($2::bigint[], $3::text[]) AS o (seq, outcome) WHERE k.action = $1 AND k.seq = o.seq`, id, seqs, outcomes)
		if err != nil {
			return err
		}
		out.Changed = tally.Changed
		_, err = tx.Exec(ctx, `UPDATE bulk_actions SET done = done + $1, changed = changed + $2, unchanged = unchanged + $3,
	skipped = skipped + $4, refused = refused + $5, lease_until = $6, updated_at = $7, last_error = '' WHERE id = $8`,
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

// bulkTodo returns the next n keys of action id without an outcome. Keys are done in
// order, each batch whole, so the first done have theirs: starting there keeps each
// batch's look-up short in a long action.
func bulkTodo(ctx context.Context, tx pgx.Tx, id int64, done, n int) ([]bulkKeyTodo, error) {
	rows, err := tx.Query(ctx, `SELECT seq, claim, source, key, state, updated_at, first_delivery FROM bulk_action_keys
	WHERE action = $1 AND seq >= $2 AND outcome = '' ORDER BY seq LIMIT $3`, id, done, limitArg(n))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (bulkKeyTodo, error) {
		var k bulkKeyTodo
		err := row.Scan(&k.seq, &k.ID, &k.source, &k.key, &k.State, &k.UpdatedAt, &k.First)
		return k, err
	})
}

// lockClaims locks the claims of batch's keys, in one statement and in id order, and
// returns them by source and key; a key without a claim is absent.
func lockClaims(ctx context.Context, tx pgx.Tx, batch []bulkKeyTodo) (map[[2]string]storage.Claim, error) {
	sources := make([]string, len(batch))
	keys := make([]string, len(batch))
	for i, k := range batch {
		sources[i], keys[i] = k.source, k.key
	}
	rows, err := tx.Query(ctx, `SELECT `+claimColumns+` FROM claims
	WHERE (source, key) IN (SELECT * FROM unnest($1::text[], $2::text[])) ORDER BY id FOR UPDATE`, sources, keys)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (storage.Claim, error) { return scanClaim(row) })
	if err != nil {
		return nil, err
	}
	out := make(map[[2]string]storage.Claim, len(list))
	for _, c := range list {
		out[[2]string{c.Source, c.Key}] = c
	}
	return out, nil
}

// NoteBulkError keeps the last failure of a running action, for its page, unless
// another runner holds the action by now.
func (db *DB) NoteBulkError(ctx context.Context, id int64, runner string, failure error) error {
	return db.writeTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE bulk_actions SET last_error = $1, updated_at = $2 WHERE id = $3 AND runner = $4`,
			storage.ReplacedText(failure.Error()), millis(db.Now()), id, storage.ReplacedText(runner))
		return err
	})
}

// bulkQuery selects the claims req's filter matches, oldest first, with what a preview
// needs of each: whether its payload is stored, and its first delivery's amount.
func bulkQuery(req storage.BulkRequest) (string, []any) {
	f, stuckBefore := req.Filter, req.StuckBefore
	where := []string{"true"}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	// equal matches column to v. Text PostgreSQL cannot hold (a NUL byte, invalid
	// UTF-8), and so no row holds, matches nothing, where sending it would fail the
	// query.
	equal := func(column, v string) {
		if !textOK(v) {
			where = append(where, "false")
			return
		}
		where = append(where, column+" = "+arg(v))
	}
	if f.Source != "" {
		equal("c.source", f.Source)
	}
	if sources := req.SourcesSearched(); len(sources) > 0 {
		texts := make([]string, len(sources))
		for i, s := range sources {
			texts[i] = textSafe(s)
		}
		where = append(where, "c.source = ANY("+arg(texts)+")")
	}
	if f.Key != "" {
		equal("c.key", f.Key)
	}
	if f.State != "" {
		equal("c.state", f.State)
	}
	if f.Stuck {
		where = append(where, "c.state IN ('processing', 'failed') AND (c.state = 'failed' OR c.updated_at < "+arg(millis(stuckBefore))+")")
	}
	if !f.From.IsZero() {
		where = append(where, "c.claimed_at >= "+arg(millis(f.From)))
	}
	if !f.To.IsZero() {
		where = append(where, "c.claimed_at < "+arg(millis(f.To)))
	}
	if f.Property != "" {
		equal("d.property", f.Property)
	}
	if f.Booking != "" {
		equal("d.booking", f.Booking)
	}
	if f.Status != "" {
		equal("d.event_status", f.Status)
	}
	if f.Currency != "" {
		equal("d.currency", storage.CurrencyCode(f.Currency))
	}
	// Flags are few: the keys are found from the suspects, through their deliveries and
	// the claims' index on (source, key), and only a suspect of the key's first delivery
	// counts. Checked per claim instead, every claim would be read.
	if f.Flag != "" || f.FlagState != "" {
		cond := "(c.source, c.key, c.first_delivery) IN (SELECT fd.source, fd.key, fd.id FROM suspects s JOIN deliveries fd ON fd.id = s.delivery WHERE true"
		if f.Flag != storage.FlagAny && f.Flag != "" {
			cond += " AND s.kind = " + arg(string(f.Flag))
		}
		if f.FlagState != "" {
			cond += " AND s.state = " + arg(f.FlagState)
		}
		where = append(where, cond+")")
	}
	return `SELECT c.id, c.source, c.key, c.state, c.updated_at, c.first_delivery, c.expires_at,
	coalesce(d.source = c.source AND d.key = c.key, false), coalesce(d.amount, ''), coalesce(d.currency, '')
FROM claims c LEFT JOIN deliveries d ON d.id = c.first_delivery
WHERE ` + strings.Join(where, " AND ") + ` ORDER BY c.id`, args
}

// millisOrZero is t as a column of times holds it, 0 for none.
func millisOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return millis(t)
}

// limitArg is limit as a LIMIT's parameter: NULL, no limit, when it is negative, as a
// negative LIMIT is in SQLite.
func limitArg(limit int) *int {
	if limit < 0 {
		return nil
	}
	return &limit
}
