package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"
)

// Bulk action kinds.
const (
	BulkRelease   = "release"   // free every key: its next delivery is accepted again
	BulkReprocess = "reprocess" // send every key's stored payload downstream again
)

// Bulk action states. An action is made as a preview; Start moves it on to queued, or to
// pending_approval when it needs a second operator; a runner takes a queued action and
// ends it done or cancelled. While its keys are being written a preview is in state
// "building", which no reader sees (BulkAction, BulkActions) and nothing can start.
const (
	BulkPreview         = "preview"
	BulkPendingApproval = "pending_approval"
	BulkQueued          = "queued"
	BulkRunning         = "running"
	BulkDone            = "done"
	BulkCancelled       = "cancelled"
	BulkRefused         = "refused"
)

// Outcomes of one key of a bulk action, besides the Refusal values.
const (
	BulkKeyChanged   = "changed"   // released, or queued to be dispatched again
	BulkKeyUnchanged = "unchanged" // already free: nothing written
	BulkKeySkipped   = "skipped"   // changed since the preview: left as it was
)

// Reasons a key that a filter matched is left out of a bulk action, counted in
// BulkAction.LeftOut.
const (
	LeftOutInFlight    = "in flight"    // processing and not stuck yet
	LeftOutFree        = "already free" // a release of a key released or expired
	LeftOutPayloadGone = "payload gone" // a reprocess whose payload is no longer stored
)

// MaxBulkKeys bounds the keys one bulk action acts on: its preview lists them all, and
// a larger set is a filter to narrow (or several actions).
const MaxBulkKeys = 50000

// previewPart is how many keys of a preview share a transaction. With 1 M claims stored
// on a shared 2-core machine, a delivery arriving during a preview of 50,000 keys
// written in one transaction waited 0.4-0.5 s for the writer; in parts of 1,000, no
// delivery waited more than 50 ms (20 ms with no preview at all).
const previewPart = 1000

// bulkSample is how many keys a preview shows.
const bulkSample = 20

// Errors of bulk actions.
var (
	// ErrSelfApproval means the person who asked for an action tried to approve or
	// refuse it: four eyes means two people.
	ErrSelfApproval = errors.New("the operator who requested an action cannot approve or refuse it")
	// ErrNotRequester means someone other than its requester tried to start an action.
	ErrNotRequester = errors.New("only the operator who made the preview can start it")
	// ErrBulkState means the action is not in a state that allows what was asked.
	ErrBulkState = errors.New("not possible in the action's current state")
	// ErrTooManyKeys means a filter matched more than MaxBulkKeys keys.
	ErrTooManyKeys = fmt.Errorf("the filter matches more than %d keys; narrow it", MaxBulkKeys)
)

// BulkFilter selects the keys of a bulk action: the filters of the keys page (source,
// state, stuck) and those of the events page that describe a key, read from its first
// delivery, the one a reprocess sends again (property, booking, status, amount). Empty
// fields match everything.
type BulkFilter struct {
	Source string `json:"source,omitempty"`
	State  string `json:"state,omitempty"` // processing | processed | failed | released
	Stuck  bool   `json:"stuck,omitempty"` // failed, or processing for longer than stuck_after
	// From and To bound when the key was claimed: at or after From, before To.
	From     time.Time `json:"from,omitzero"`
	To       time.Time `json:"to,omitzero"`
	Property string    `json:"property,omitempty"`
	Booking  string    `json:"booking,omitempty"`
	Status   string    `json:"status,omitempty"` // the event's own status, e.g. "cancelled"
	Currency string    `json:"currency,omitempty"`
	// AmountMin and AmountMax bound the amount in major units ("100.00"), both
	// included. A key whose delivery carries no amount matches neither.
	AmountMin string `json:"amount_min,omitempty"`
	AmountMax string `json:"amount_max,omitempty"`
}

// Check says what is wrong with f, naming the field, or returns nil.
func (f BulkFilter) Check() error {
	switch f.State {
	case "", StateProcessing, StateProcessed, StateFailed, StateReleased:
	default:
		return fmt.Errorf("state %q: want processing, processed, failed or released", f.State)
	}
	if f.Stuck && f.State != "" {
		return errors.New("choose stuck or a state, not both")
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return errors.New("the time range ends before it starts")
	}
	var lo, hi *big.Rat
	for _, b := range []struct {
		name, v string
		out     **big.Rat
	}{{"amount_min", f.AmountMin, &lo}, {"amount_max", f.AmountMax, &hi}} {
		if b.v == "" {
			continue
		}
		r, _, ok := parseDecimal(b.v)
		if !ok {
			return fmt.Errorf("%s %q: want a plain amount in major units, such as 100.00", b.name, b.v)
		}
		*b.out = r
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return errors.New("amount_min is above amount_max")
	}
	return nil
}

// MoneyTotal is the money of a bulk action's keys in one currency, summed exactly.
type MoneyTotal struct {
	Currency string `json:"currency"` // "" for amounts whose source reads no currency
	Keys     int    `json:"keys"`     // keys that carry an amount in it
	Sum      string `json:"sum"`      // their amounts summed, in major units ("-120.50")
	// Gross is the sum of their absolute values: the money that moves, refunds and
	// charges alike. Thresholds are compared with it.
	Gross string `json:"gross"`
}

// BulkAction is a release or reprocess of every key a filter matched.
type BulkAction struct {
	ID          int64
	Kind        string // BulkRelease or BulkReprocess
	Filter      BulkFilter
	Reason      string
	RequestedBy string
	State       string
	// Total is the number of keys the action acts on: those matched at the preview.
	Total int
	// Money is their amounts per currency, in the order of the codes; NoAmount counts
	// those that carry none, Unreadable those whose amount is not a number.
	Money                []MoneyTotal
	NoAmount, Unreadable int
	// LeftOut counts the keys the filter matched that the action cannot act on, by
	// reason (LeftOutInFlight …).
	LeftOut       map[string]int
	NeedsApproval bool
	// Done counts the keys with an outcome: Changed + Unchanged + Skipped + Refused.
	Done, Changed, Unchanged, Skipped, Refused int
	LastError                                  string // the last failure of a batch, retried
	DecidedBy, DecisionReason, CancelledBy     string
	CancelRequested                            bool
	CreatedAt, StartedAt, DecidedAt            time.Time // zero until then
	FinishedAt, UpdatedAt                      time.Time
}

// Finished reports whether a is over: done, cancelled or refused.
func (a BulkAction) Finished() bool {
	return a.State == BulkDone || a.State == BulkCancelled || a.State == BulkRefused
}

// BulkKey is one key of a bulk action.
type BulkKey struct {
	Source, Key      string
	State            string // at the preview
	Amount, Currency string
	Outcome          string // "" until done
}

// BulkRequest asks for a bulk action's preview.
type BulkRequest struct {
	Kind   string
	Filter BulkFilter
	Reason string // required: it goes to the audit row of each key
	Actor  string
	// StuckBefore: a key processing since before this time is stuck.
	StuckBefore time.Time
	// Thresholds say whether a reprocess will need approval (shown in the preview;
	// Start decides with the thresholds of its own time).
	Thresholds ApprovalThresholds
}

// ApprovalThresholds are the amounts per currency (upper-case codes, "*" for every
// other currency and for amounts of none) above which a reprocess waits for a second
// operator's approval. Build it with ParseApprovalThresholds.
type ApprovalThresholds map[string]string

// ParseApprovalThresholds checks the configured thresholds and returns them with
// their codes in upper case. Each code is three letters (ISO 4217) or "*"; each amount
// a non-negative plain number in major units with no more decimals than its currency
// has ("1000.00"; "5000" for JPY).
func ParseApprovalThresholds(in map[string]string) (ApprovalThresholds, error) {
	out := ApprovalThresholds{}
	for _, code := range slices.Sorted(maps.Keys(in)) {
		amount := strings.TrimSpace(in[code])
		c := strings.ToUpper(strings.TrimSpace(code))
		if c != "*" && (len(c) != 3 || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "") {
			return nil, fmt.Errorf("approval_threshold: %q is not a currency code: want three letters such as EUR, or \"*\" for any other currency", code)
		}
		if _, dup := out[c]; dup {
			return nil, fmt.Errorf("approval_threshold: %s is given twice", c)
		}
		r, places, ok := parseDecimal(amount)
		switch {
		case !ok || r.Sign() < 0:
			return nil, fmt.Errorf("approval_threshold: %s = %q: want a non-negative amount in major units, such as \"1000.00\"", code, in[code])
		case c != "*" && places > CurrencyExponent(c):
			return nil, fmt.Errorf("approval_threshold: %s = %q: %s has %d decimal places", code, in[code], c, CurrencyExponent(c))
		}
		out[c] = amount
	}
	return out, nil
}

// Over returns, for each currency of money whose gross amount is above its threshold,
// a line that says so ("EUR 12000.00 is above 1000.00"); none when t is empty.
// Unreadable amounts, when t has any threshold, are over too: what they are is unknown.
func (t ApprovalThresholds) Over(money []MoneyTotal, unreadable int) []string {
	if len(t) == 0 {
		return nil
	}
	var out []string
	for _, m := range money {
		limit, ok := t[m.Currency]
		if !ok {
			if limit, ok = t["*"]; !ok {
				continue
			}
		}
		g, _, gok := parseDecimal(m.Gross)
		l, _, lok := parseDecimal(limit)
		if gok && lok && g.Cmp(l) > 0 {
			code := m.Currency
			if code == "" {
				code = "(no currency)"
			}
			out = append(out, fmt.Sprintf("%s %s is above %s", code, m.Gross, limit))
		}
	}
	if unreadable > 0 {
		out = append(out, fmt.Sprintf("%d amounts are not numbers", unreadable))
	}
	return out
}

// parseDecimal reads a plain decimal number ("-12.50") exactly, with the number of its
// decimal places; ok is false for anything else (exponents, fractions, spaces).
func parseDecimal(s string) (r *big.Rat, places int, ok bool) {
	digits := strings.TrimPrefix(s, "-")
	whole, frac, dot := strings.Cut(digits, ".")
	if whole == "" || !allDigits(whole) || (dot && (frac == "" || !allDigits(frac))) {
		return nil, 0, false
	}
	r, ok = new(big.Rat).SetString(s)
	return r, len(frac), ok
}

// moneySum adds amounts of one currency exactly.
type moneySum struct {
	keys       int
	sum, gross big.Rat
	places     int // the most decimal places of an amount, at least the currency's
}

func sumMoney(keys []BulkKey) (money []MoneyTotal, noAmount, unreadable int) {
	sums := map[string]*moneySum{}
	for _, k := range keys {
		if k.Amount == "" {
			noAmount++
			continue
		}
		r, places, ok := parseDecimal(k.Amount)
		if !ok {
			unreadable++
			continue
		}
		s := sums[k.Currency]
		if s == nil {
			s = &moneySum{places: CurrencyExponent(k.Currency)}
			sums[k.Currency] = s
		}
		s.keys++
		s.sum.Add(&s.sum, r)
		s.gross.Add(&s.gross, new(big.Rat).Abs(r))
		s.places = max(s.places, places)
	}
	for _, code := range slices.Sorted(maps.Keys(sums)) {
		s := sums[code]
		money = append(money, MoneyTotal{Currency: code, Keys: s.keys,
			Sum: s.sum.FloatString(s.places), Gross: s.gross.FloatString(s.places)})
	}
	return money, noAmount, unreadable
}

// matchAmount reports whether amount is within f's amount range.
func (f BulkFilter) matchAmount(amount string) bool {
	if f.AmountMin == "" && f.AmountMax == "" {
		return true
	}
	r, _, ok := parseDecimal(amount)
	if !ok {
		return false
	}
	if lo, _, ok := parseDecimal(f.AmountMin); ok && r.Cmp(lo) < 0 {
		return false
	}
	if hi, _, ok := parseDecimal(f.AmountMax); ok && r.Cmp(hi) > 0 {
		return false
	}
	return true
}

// query selects the claims f matches, oldest first, with what a preview needs of
// each: whether its payload is stored, and its first delivery's amount.
func (f BulkFilter) query(stuckBefore time.Time) (string, []any) {
	where := []string{"1 = 1"}
	var args []any
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if f.Source != "" {
		add("c.source = ?", f.Source)
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
		add("d.currency = ?", CurrencyCode(f.Currency))
	}
	return `SELECT c.id, c.source, c.key, c.state, c.updated_at, c.expires_at,
	coalesce(d.source = c.source AND d.key = c.key, 0), coalesce(d.amount, ''), coalesce(d.currency, '')
FROM claims c LEFT JOIN deliveries d ON d.id = c.first_delivery
WHERE ` + strings.Join(where, " AND ") + ` ORDER BY c.id`, args
}

// previewKey is one key a preview found, with what its run checks against.
type previewKey struct {
	BulkKey
	claim     int64
	updatedAt int64
}

// CreateBulkPreview finds the keys req's filter matches, leaves out those the action
// cannot act on (counted by reason), and stores the action as a preview with its keys,
// their money per currency and whether a reprocess will need approval. Nothing is
// released until Start. Returns ErrTooManyKeys past MaxBulkKeys; a bad kind, filter or
// reason is an error that names it.
func (db *DB) CreateBulkPreview(ctx context.Context, req BulkRequest) (BulkAction, error) {
	req.Reason = strings.TrimSpace(req.Reason)
	switch {
	case req.Kind != BulkRelease && req.Kind != BulkReprocess:
		return BulkAction{}, fmt.Errorf("kind %q: want release or reprocess", req.Kind)
	case req.Reason == "":
		return BulkAction{}, errors.New("a reason is required: it goes to the audit log")
	case len(req.Reason) > 500:
		return BulkAction{}, errors.New("keep the reason under 500 characters")
	case req.Actor == "":
		return BulkAction{}, errors.New("bulk action: no actor")
	}
	if err := req.Filter.Check(); err != nil {
		return BulkAction{}, err
	}
	req.Filter.Currency = CurrencyCode(req.Filter.Currency)
	now := db.Now()
	query, args := req.Filter.query(req.StuckBefore)
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	defer rows.Close()
	var keys []previewKey
	leftOut := map[string]int{}
	for rows.Next() {
		var k previewKey
		var expires int64
		var stored bool
		if err := rows.Scan(&k.claim, &k.Source, &k.Key, &k.State, &k.updatedAt, &expires, &stored, &k.Amount, &k.Currency); err != nil {
			return BulkAction{}, fmt.Errorf("bulk preview: %w", err)
		}
		if !req.Filter.matchAmount(k.Amount) {
			continue
		}
		free := k.State == StateReleased || (k.State != StateProcessing && expires <= millis(now))
		switch {
		case k.State == StateProcessing && k.updatedAt >= millis(req.StuckBefore):
			leftOut[LeftOutInFlight]++
		case req.Kind == BulkRelease && free:
			leftOut[LeftOutFree]++
		case req.Kind == BulkReprocess && !stored:
			leftOut[LeftOutPayloadGone]++
		default:
			if len(keys) == MaxBulkKeys {
				return BulkAction{}, ErrTooManyKeys
			}
			keys = append(keys, k)
		}
	}
	if err := rows.Err(); err != nil {
		return BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	rows.Close()

	plain := make([]BulkKey, len(keys))
	for i, k := range keys {
		plain[i] = k.BulkKey
	}
	a := BulkAction{Kind: req.Kind, Filter: req.Filter, Reason: req.Reason, RequestedBy: req.Actor, State: BulkPreview,
		Total: len(keys), LeftOut: leftOut, CreatedAt: now, UpdatedAt: now}
	a.Money, a.NoAmount, a.Unreadable = sumMoney(plain)
	a.NeedsApproval = req.Kind == BulkReprocess && len(req.Thresholds.Over(a.Money, a.Unreadable)) > 0
	filter, _ := json.Marshal(a.Filter)
	money, _ := json.Marshal(moneyRecord{a.Money, a.NoAmount, a.Unreadable})
	left, _ := json.Marshal(leftOut)
	if err := db.clearOldPreviews(ctx, now.Add(-24*time.Hour)); err != nil {
		return BulkAction{}, fmt.Errorf("bulk preview: clearing previews of more than a day ago: %w", err)
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
		return BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	// The keys go in previewPart at a time, each part its own transaction, so that
	// intake waits for one part at most; the action is a preview (listed, startable)
	// only once the last is in.
	for i := 0; i < len(keys) && err == nil; i += previewPart {
		err = db.writeTx(ctx, func(tx *sql.Tx) error {
			const chunk = 100 // rows per INSERT: well under SQLite's limit of variables
			for j := i; j < min(i+previewPart, len(keys)); j += chunk {
				part := keys[j:min(j+chunk, i+previewPart, len(keys))]
				vals := make([]any, 0, len(part)*9)
				for n, k := range part {
					vals = append(vals, a.ID, j+n, k.claim, k.Source, k.Key, k.State, k.updatedAt, k.Amount, k.Currency)
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO bulk_action_keys (action, seq, claim, source, key, state, updated_at,
					amount, currency) VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?),", len(part)), ","), vals...); err != nil {
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
		return BulkAction{}, fmt.Errorf("bulk preview: %w", err)
	}
	return a, nil
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
				_, err := tx.ExecContext(ctx, `DELETE FROM bulk_actions WHERE id = ? AND state = 'building'`, o.id)
				return err
			})
		}
	}
	return err
}

// moneyRecord is how a preview's money is stored.
type moneyRecord struct {
	Money      []MoneyTotal `json:"money"`
	NoAmount   int          `json:"no_amount"`
	Unreadable int          `json:"unreadable"`
}

const bulkColumns = `id, kind, filter, reason, requested_by, state, total, money, left_out, needs_approval,
	done, changed, unchanged, skipped, refused, last_error, decided_by, decision_reason, cancelled_by,
	cancel_requested, created_at, started_at, decided_at, finished_at, updated_at`

func scanBulk(s scanner) (BulkAction, error) {
	var a BulkAction
	var filter, money, left string
	var created, started, decided, finished, updated int64
	err := s.Scan(&a.ID, &a.Kind, &filter, &a.Reason, &a.RequestedBy, &a.State, &a.Total, &money, &left, &a.NeedsApproval,
		&a.Done, &a.Changed, &a.Unchanged, &a.Skipped, &a.Refused, &a.LastError, &a.DecidedBy, &a.DecisionReason,
		&a.CancelledBy, &a.CancelRequested, &created, &started, &decided, &finished, &updated)
	if err != nil {
		return BulkAction{}, err
	}
	var m moneyRecord
	if err := errors.Join(json.Unmarshal([]byte(filter), &a.Filter), json.Unmarshal([]byte(money), &m),
		json.Unmarshal([]byte(left), &a.LeftOut)); err != nil {
		return BulkAction{}, fmt.Errorf("bulk action %d: %w", a.ID, err)
	}
	a.Money, a.NoAmount, a.Unreadable = m.Money, m.NoAmount, m.Unreadable
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
func (db *DB) BulkAction(ctx context.Context, id int64) (BulkAction, error) {
	a, err := scanBulk(db.read.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = ? AND state != 'building'`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return BulkAction{}, fmt.Errorf("bulk action %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return BulkAction{}, fmt.Errorf("bulk action %d: %w", id, err)
	}
	return a, nil
}

// BulkActions returns up to limit bulk actions, newest first: those in state, or all
// of them when state is "".
func (db *DB) BulkActions(ctx context.Context, state string, limit int) ([]BulkAction, error) {
	q := `SELECT ` + bulkColumns + ` FROM bulk_actions WHERE state = ? ORDER BY id DESC LIMIT ?`
	args := []any{state, limit}
	if state == "" {
		q, args = `SELECT `+bulkColumns+` FROM bulk_actions WHERE state != 'building' ORDER BY id DESC LIMIT ?`, []any{limit}
	}
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("bulk actions: %w", err)
	}
	defer rows.Close()
	var out []BulkAction
	for rows.Next() {
		a, err := scanBulk(rows)
		if err != nil {
			return nil, fmt.Errorf("bulk actions: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// BulkKeys returns the first limit keys of a bulk action, in the preview's order, with
// their outcomes so far.
func (db *DB) BulkKeys(ctx context.Context, id int64, limit int) ([]BulkKey, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT source, key, state, amount, currency, outcome FROM bulk_action_keys
		WHERE action = ? ORDER BY seq LIMIT ?`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("keys of bulk action %d: %w", id, err)
	}
	defer rows.Close()
	var out []BulkKey
	for rows.Next() {
		var k BulkKey
		if err := rows.Scan(&k.Source, &k.Key, &k.State, &k.Amount, &k.Currency, &k.Outcome); err != nil {
			return nil, fmt.Errorf("keys of bulk action %d: %w", id, err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// BulkSample returns the keys a preview shows.
func (db *DB) BulkSample(ctx context.Context, id int64) ([]BulkKey, error) {
	return db.BulkKeys(ctx, id, bulkSample)
}

// bulkTx loads action id inside tx, runs fn on it and writes the audit row fn returns
// (none when its Action is ""). fn's error rolls everything back.
func (db *DB) bulkTx(ctx context.Context, id int64, fn func(tx *sql.Tx, a *BulkAction, now time.Time) (AuditEntry, error)) (BulkAction, error) {
	var out BulkAction
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		a, err := scanBulk(tx.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		now := db.Now()
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
		return BulkAction{}, fmt.Errorf("bulk action %d: %w", id, err)
	}
	return out, nil
}

// describe is an action in words for its audit rows: "bulk action 7 (reprocess of 12
// keys, EUR 1200.00): reason".
func (a BulkAction) describe(reason string) string {
	var money []string
	for _, m := range a.Money {
		code := m.Currency
		if code == "" {
			code = "(no currency)"
		}
		money = append(money, code+" "+m.Gross)
	}
	s := fmt.Sprintf("bulk action %d (%s of %d keys", a.ID, a.Kind, a.Total)
	if len(money) > 0 {
		s += ", " + strings.Join(money, ", ")
	}
	return s + "): " + reason
}

// StartBulkAction starts a preview on behalf of its requester (ErrNotRequester for
// anyone else): a reprocess whose money is above a threshold waits for approval
// (pending_approval), anything else is queued for the runner. Audited.
func (db *DB) StartBulkAction(ctx context.Context, id int64, actor string, t ApprovalThresholds) (BulkAction, error) {
	a, err := db.bulkTx(ctx, id, func(tx *sql.Tx, a *BulkAction, now time.Time) (AuditEntry, error) {
		switch {
		case a.State != BulkPreview:
			return AuditEntry{}, fmt.Errorf("start: %w (%s)", ErrBulkState, a.State)
		case actor != a.RequestedBy:
			return AuditEntry{}, ErrNotRequester
		}
		over := t.Over(a.Money, a.Unreadable)
		a.NeedsApproval = a.Kind == BulkReprocess && len(over) > 0
		a.State = BulkQueued
		words := a.describe(a.Reason)
		if a.NeedsApproval {
			a.State = BulkPendingApproval
			words += "; awaits approval: " + strings.Join(over, ", ")
		}
		a.StartedAt = now
		_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = ?, needs_approval = ?, started_at = ?, updated_at = ? WHERE id = ?`,
			a.State, a.NeedsApproval, millis(now), millis(now), a.ID)
		return AuditEntry{Actor: actor, Action: "bulk start", Reason: words}, err
	})
	if err == nil && a.State == BulkQueued {
		db.wakeBulk()
	}
	return a, err
}

// ApproveBulkAction approves an action waiting for approval, which is then queued;
// RefuseBulkAction refuses it for good. Either is audited with its reason (required),
// and returns ErrSelfApproval when actor requested the action.
func (db *DB) ApproveBulkAction(ctx context.Context, id int64, actor, reason string) (BulkAction, error) {
	return db.decideBulk(ctx, id, actor, reason, true)
}

// RefuseBulkAction refuses an action waiting for approval: see ApproveBulkAction.
func (db *DB) RefuseBulkAction(ctx context.Context, id int64, actor, reason string) (BulkAction, error) {
	return db.decideBulk(ctx, id, actor, reason, false)
}

func (db *DB) decideBulk(ctx context.Context, id int64, actor, reason string, approve bool) (BulkAction, error) {
	reason = strings.TrimSpace(reason)
	verb := map[bool]string{true: "approve", false: "refuse"}[approve]
	switch {
	case reason == "":
		return BulkAction{}, fmt.Errorf("%s bulk action %d: a reason is required: it goes to the audit log", verb, id)
	case len(reason) > 500:
		return BulkAction{}, fmt.Errorf("%s bulk action %d: keep the reason under 500 characters", verb, id)
	}
	a, err := db.bulkTx(ctx, id, func(tx *sql.Tx, a *BulkAction, now time.Time) (AuditEntry, error) {
		switch {
		case a.State != BulkPendingApproval:
			return AuditEntry{}, fmt.Errorf("%s: %w (%s)", verb, ErrBulkState, a.State)
		case actor == "" || actor == a.RequestedBy:
			return AuditEntry{}, ErrSelfApproval
		}
		a.State = BulkQueued
		if !approve {
			a.State = BulkRefused
			a.FinishedAt = now
		}
		a.DecidedBy, a.DecisionReason, a.DecidedAt = actor, reason, now
		_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = ?, decided_by = ?, decision_reason = ?, decided_at = ?,
			finished_at = ?, updated_at = ? WHERE id = ?`, a.State, actor, reason, millis(now), millis(a.FinishedAt)*boolInt(!approve),
			millis(now), a.ID)
		return AuditEntry{Actor: actor, Action: "bulk " + verb, Reason: a.describe(reason)}, err
	})
	if err == nil && approve {
		db.wakeBulk()
	}
	return a, err
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// CancelBulkAction cancels an action: at once when it has not begun to run, else the
// runner stops before its next batch (the keys done by then stay done). Any operator
// may cancel; it is audited. ErrBulkState for an action that is over.
func (db *DB) CancelBulkAction(ctx context.Context, id int64, actor, reason string) (BulkAction, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "cancelled"
	}
	if len(reason) > 500 {
		return BulkAction{}, fmt.Errorf("cancel bulk action %d: keep the reason under 500 characters", id)
	}
	return db.bulkTx(ctx, id, func(tx *sql.Tx, a *BulkAction, now time.Time) (AuditEntry, error) {
		switch a.State {
		case BulkPreview, BulkPendingApproval, BulkQueued:
			a.State, a.FinishedAt = BulkCancelled, now
		case BulkRunning:
			if a.CancelRequested {
				return AuditEntry{}, nil // asked already
			}
			a.CancelRequested = true
		default:
			return AuditEntry{}, fmt.Errorf("cancel: %w (%s)", ErrBulkState, a.State)
		}
		a.CancelledBy = actor
		_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET state = ?, cancel_requested = ?, cancelled_by = ?,
			finished_at = ?, updated_at = ? WHERE id = ?`, a.State, a.CancelRequested, actor,
			millis(a.FinishedAt)*boolInt(!a.FinishedAt.IsZero()), millis(now), a.ID)
		return AuditEntry{Actor: actor, Action: "bulk cancel", Reason: a.describe(reason)}, err
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

// BulkBatch says what one batch of a running action did.
type BulkBatch struct {
	Changed int  // keys released or queued again in this batch
	Over    bool // the action is over (done or cancelled), or no longer this runner's
}

// RunBulkBatch acts on up to n keys of action id that have no outcome yet, in one
// transaction that writes each key's release and audit row (actor: the requester;
// reason: the action's, naming it) and its outcome together, then renews runner's lease.
// A key whose claim changed since the preview (another state, re-claimed, gone) is
// skipped. A cancel asked for is honoured before any key; with no key left the action
// is done.
func (db *DB) RunBulkBatch(ctx context.Context, id int64, runner string, stuckBefore time.Time, n int, lease time.Duration) (BulkBatch, error) {
	var out BulkBatch
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		out = BulkBatch{}
		a, err := scanBulk(tx.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_actions WHERE id = ?`, id))
		if err != nil {
			return err
		}
		var holder string
		if err := tx.QueryRowContext(ctx, `SELECT runner FROM bulk_actions WHERE id = ?`, id).Scan(&holder); err != nil {
			return err
		}
		now := db.Now()
		if a.State != BulkRunning || holder != runner {
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
		rows, err := tx.QueryContext(ctx, `SELECT seq, claim, source, key, state, updated_at FROM bulk_action_keys
			WHERE action = ? AND seq >= ? AND outcome = '' ORDER BY seq LIMIT ?`, id, a.Done, n)
		if err != nil {
			return err
		}
		type todo struct {
			seq, claim, updatedAt int64
			source, key, state    string
		}
		var batch []todo
		for rows.Next() {
			var k todo
			if err := rows.Scan(&k.seq, &k.claim, &k.source, &k.key, &k.state, &k.updatedAt); err != nil {
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
		reason := fmt.Sprintf("%s (bulk action %d", a.Reason, a.ID)
		if a.DecidedBy != "" {
			reason += ", approved by " + a.DecidedBy
		}
		reason += ")"
		var changed, unchanged, skipped, refused int
		for _, k := range batch {
			c, err := scanClaim(tx.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM claims WHERE source = ? AND key = ?`, k.source, k.key))
			outcome := ""
			switch {
			case errors.Is(err, sql.ErrNoRows):
				outcome = string(RefusedNotFound)
			case err != nil:
				return err
			case c.ID != k.claim || c.State != k.state || millis(c.UpdatedAt) != k.updatedAt:
				outcome = BulkKeySkipped
			default:
				res, why, err := db.releaseIn(ctx, tx, Release{Source: k.source, Key: k.key, Actor: a.RequestedBy,
					Reason: reason, Reprocess: a.Kind == BulkReprocess, StuckBefore: stuckBefore})
				if err != nil {
					return err
				}
				switch {
				case why != nil:
					r, ok := RefusalOf(why)
					if !ok {
						return why
					}
					outcome = string(r)
				case res.Changed:
					outcome = BulkKeyChanged
				default:
					outcome = BulkKeyUnchanged
				}
			}
			switch outcome {
			case BulkKeyChanged:
				changed++
			case BulkKeyUnchanged:
				unchanged++
			case BulkKeySkipped:
				skipped++
			default:
				refused++
			}
			if _, err := tx.ExecContext(ctx, `UPDATE bulk_action_keys SET outcome = ? WHERE action = ? AND seq = ?`, outcome, id, k.seq); err != nil {
				return err
			}
		}
		out.Changed = changed
		_, err = tx.ExecContext(ctx, `UPDATE bulk_actions SET done = done + ?, changed = changed + ?, unchanged = unchanged + ?,
			skipped = skipped + ?, refused = refused + ?, lease_until = ?, updated_at = ?, last_error = '' WHERE id = ?`,
			len(batch), changed, unchanged, skipped, refused, millis(now.Add(lease)), millis(now), id)
		return err
	})
	if err != nil {
		return BulkBatch{}, fmt.Errorf("bulk action %d: %w", id, err)
	}
	return out, nil
}

// noteBulkError keeps the last failure of a running action, for its page.
func (db *DB) noteBulkError(ctx context.Context, id int64, failure error) error {
	return db.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE bulk_actions SET last_error = ?, updated_at = ? WHERE id = ?`,
			failure.Error(), millis(db.Now()), id)
		return err
	})
}
