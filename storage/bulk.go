package storage

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
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
	LeftOutFree        = "already free" // a release of a key released already
	LeftOutPayloadGone = "payload gone" // a reprocess whose payload is no longer stored
)

// LeftOutOf says why an action of kind leaves out a key the filter matched, in state
// and held until expires at now, or "" when it acts on the key; inFlight: the key is
// processing and not stuck yet; stored: the payload a reprocess would send is stored.
// expired reports that a release acts on a key settled and past its ttl
// (BulkAction.Expired), as releasing it alone does.
func LeftOutOf(kind, state string, inFlight, stored bool, expires, now time.Time) (why string, expired bool) {
	switch {
	case state == StateProcessing && inFlight:
		return LeftOutInFlight, false
	case kind == BulkRelease && state == StateReleased:
		return LeftOutFree, false
	case kind == BulkReprocess && !stored:
		return LeftOutPayloadGone, false
	}
	return "", kind == BulkRelease && AlreadyFree(state, expires, now)
}

// MaxPreviewAge, a day, is how long a preview may be started, and a start awaiting approval
// approved, after the preview was made; a preview never started is deleted after it.
const MaxPreviewAge = 24 * time.Hour

// MaxBulkKeys bounds the keys one bulk action acts on: its preview lists them all, and
// a larger set is a filter to narrow (or several actions).
const MaxBulkKeys = 50000

// Errors of bulk actions.
var (
	// ErrSelfApproval means the person who asked for an action tried to approve or
	// refuse it: four eyes means two people.
	ErrSelfApproval = errors.New("the operator who requested an action cannot approve or refuse it")
	// ErrNotRequester means someone other than its requester tried to start an action.
	ErrNotRequester = errors.New("only the operator who made the preview can start it")
	// ErrBulkState means the action is not in a state that allows what was asked.
	ErrBulkState = errors.New("not possible in the action's current state")
	// ErrPreviewStale means the action's preview was made more than MaxPreviewAge ago:
	// the keys it lists, and their states and money, may no longer be what a new
	// preview of its filter would show.
	ErrPreviewStale = errors.New("its preview was made more than a day ago: make a new one")
	// ErrTooManyKeys means a filter matched more than MaxBulkKeys keys.
	ErrTooManyKeys = fmt.Errorf("the filter matches more than %d keys; narrow it", MaxBulkKeys)
)

// RequesterGoneError refuses the approval of an action whose requester is no longer an
// operator (or an admin): approved, it would run under the name of someone who may no
// longer reprocess. Refusing it stays possible, which closes it.
type RequesterGoneError struct {
	Name string
	Role string // their role now; "" when they were removed
}

// CheckRequester returns a RequesterGoneError unless role, the role the requester name
// of an action has now ("" when no user has that name), may reprocess. The engines call
// it in the approval's own transaction, which holds the requester's row: checked apart,
// a demotion or removal committed between the check and the approval would pass.
func CheckRequester(name, role string) error {
	if RoleAtLeast(role, RoleOperator) {
		return nil
	}
	return &RequesterGoneError{Name: name, Role: role}
}

func (e *RequesterGoneError) Error() string {
	if e.Role == "" {
		return fmt.Sprintf("its requester is no longer an operator (%s was removed)", e.Name)
	}
	return fmt.Sprintf("its requester is no longer an operator (%s is a %s now)", e.Name, e.Role)
}

// ActorGoneError refuses a step of an action (its start, approval, refusal or
// cancellation) by someone who is no longer an operator (or an admin), the roles the
// console and the API let take it: a role checked before the step's transaction may be
// a demotion or a removal behind. Verb says what they may no longer do: "start",
// "approve or refuse" (one right, so either decision is worded alike) or "cancel".
type ActorGoneError struct {
	Verb string
	Name string
	Role string // their role now; "" when they were removed
}

// CheckActor returns an ActorGoneError for verb unless role, the role the name taking a
// step of an action has now ("" when no user has that name), may take it. As with
// CheckRequester, the engines call it in the step's own transaction, which holds the
// actor's row.
func CheckActor(verb, name, role string) error {
	if RoleAtLeast(role, RoleOperator) {
		return nil
	}
	return &ActorGoneError{Verb: verb, Name: name, Role: role}
}

func (e *ActorGoneError) Error() string {
	if e.Role == "" {
		return fmt.Sprintf("only an operator may %s an action, and %s was removed", e.Verb, e.Name)
	}
	return fmt.Sprintf("only an operator may %s an action, and %s is a %s now", e.Verb, e.Name, e.Role)
}

// BulkFilter selects the keys of a bulk action: the filters of the keys page (source,
// state, stuck) and those of the events page that describe a key, read from its first
// delivery, the one a reprocess sends again (key, property, booking, status, amount,
// flags). Empty fields match everything.
type BulkFilter struct {
	Source string `json:"source,omitempty"`
	Key    string `json:"key,omitempty"`   // exactly this key, in Source or in any source
	State  string `json:"state,omitempty"` // processing | processed | failed | released
	Stuck  bool   `json:"stuck,omitempty"` // failed, or processing for longer than stuck_after
	// From and To bound when the key was claimed (its first delivery received): at or
	// after From, before To. The events list's bound when any delivery was received.
	From     time.Time `json:"from,omitzero"`
	To       time.Time `json:"to,omitzero"`
	Property string    `json:"property,omitempty"`
	Booking  string    `json:"booking,omitempty"`
	Status   string    `json:"status,omitempty"` // the event's own status, e.g. "cancelled"
	Currency string    `json:"currency,omitempty"`
	// Flag selects the keys whose first delivery is flagged by a suspect of this kind
	// (FlagAny: of any kind); FlagState, alone or with it, by a suspect in that review
	// state. Flags are only ever on accepted deliveries, which claim their keys.
	Flag      SuspectKind `json:"flag,omitempty"`
	FlagState string      `json:"flag_state,omitempty"`
	// AmountMin and AmountMax bound the amount's magnitude in major units ("100.00"),
	// both included: a refund of -5000.00 is above an AmountMax of 100, as the approval
	// thresholds and the ledger count it. A key whose delivery carries no amount, or
	// one that is not a plain decimal, matches neither.
	AmountMin string `json:"amount_min,omitempty"`
	AmountMax string `json:"amount_max,omitempty"`
}

// Check says what is wrong with f, naming the field, or returns nil.
func (f BulkFilter) Check() error {
	if err := CheckState(f.State); err != nil {
		return err
	}
	if f.Stuck && f.State != "" {
		return errors.New("choose stuck or a state, not both")
	}
	if f.Key != "" && strings.TrimSpace(f.Key) == "" {
		return errors.New("key: blank; leave it out to match every key")
	}
	if err := CheckFlag(f.Flag, f.FlagState); err != nil {
		return err
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
		r, _, ok := ParseDecimal(b.v)
		if !ok {
			return fmt.Errorf("%s %q: want a plain amount in major units, such as 100.00", b.name, b.v)
		}
		if r.Sign() < 0 {
			// A signed bound would read as a range of signed amounts: "-100" as an
			// upper bound would match nothing, as a lower one everything.
			return fmt.Errorf("%s %q: amounts are compared without their sign, refunds and charges alike; give it without one", b.name, b.v)
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
	LeftOut map[string]int
	// Expired counts, of a release's keys, those settled and past their ttl: free for
	// their next delivery already, yet their trace and business keys would flag, or
	// block, a re-send of their events. Released, those are forgotten, as a release
	// of one of them alone does.
	Expired       int
	NeedsApproval bool
	// Done counts the keys with an outcome: Changed + Unchanged + Skipped + Refused.
	Done, Changed, Unchanged, Skipped, Refused int
	LastError                                  string // the last failure of a batch, retried
	DecidedBy, DecisionReason, CancelledBy     string
	CancelRequested                            bool
	CreatedAt, StartedAt, DecidedAt            time.Time // zero until then
	FinishedAt, UpdatedAt                      time.Time
}

// Stale reports whether a waits to be started or approved on a preview too old for
// either at now (ErrPreviewStale); an action past those steps is never stale.
func (a BulkAction) Stale(now time.Time) bool {
	return (a.State == BulkPreview || a.State == BulkPendingApproval) && now.Sub(a.CreatedAt) > MaxPreviewAge
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
	// KeySources are the configured sources, searched when Filter.Source is empty
	// (SourcesSearched).
	KeySources []string
	// StuckBefore: a key processing since before this time is stuck.
	StuckBefore time.Time
	// Thresholds say whether a reprocess will need approval (shown in the preview;
	// Start decides with the thresholds of its own time).
	Thresholds ApprovalThresholds
}

// Check says what is wrong with r, or nil: its kind, its reason (Reason, trimmed first,
// as it is stored), its actor and its filter. Every engine checks a request this way
// before it looks for a key.
func (r *BulkRequest) Check() error {
	r.Reason = strings.TrimSpace(r.Reason)
	switch {
	case r.Kind != BulkRelease && r.Kind != BulkReprocess:
		return fmt.Errorf("kind %q: want release or reprocess", r.Kind)
	case r.Reason == "":
		return errors.New("a reason is required: it goes to the audit log")
	}
	if err := BulkReasonTooLong(r.Reason); err != nil {
		return err
	}
	if r.Actor == "" {
		return errors.New("bulk action: no actor")
	}
	return r.Filter.Check()
}

// BulkReasonTooLong refuses a reason of a bulk action or of its decision longer than
// MaxReason characters, the bound the console's forms, the API and the command line
// check (ReasonProblem). What else a reason may hold is theirs to say: an engine stores
// whatever it is given, escaped where its text cannot hold it.
func BulkReasonTooLong(reason string) error {
	if n := utf8.RuneCountInString(reason); n > MaxReason {
		return fmt.Errorf("keep the reason to %d characters at most (it has %d)", MaxReason, n)
	}
	return nil
}

// SourcesSearched returns the sources whose claims r covers when its filter names no
// source, or nil for every claim: the configured ones (KeySources) for a key, as the
// events list searches (DeliveryFilter.KeySources), since keys are scoped by source
// and found through an index that starts with it (without them a key would be searched
// for in every claim stored); and for a reprocess, since a key of a source no longer
// run would wait in processing for a dispatcher that nothing here starts.
func (r BulkRequest) SourcesSearched() []string {
	if r.Filter.Source != "" || (r.Filter.Key == "" && r.Kind != BulkReprocess) {
		return nil
	}
	return r.KeySources
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
		r, places, ok := ParseDecimal(amount)
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

// ReprocessWindow is how far back the reprocesses one operator made without approval add up
// against the thresholds: several reprocesses, each under a threshold, need a second
// operator once together they are above it, as one reprocess of them all would.
const ReprocessWindow = 24 * time.Hour

// Over returns, for each currency of money whose gross amount is above its threshold,
// a line that says so ("EUR 12000.00 is above 1000.00"); none when t is empty.
// Unreadable amounts, when t has any threshold, are over too: what they are is unknown.
func (t ApprovalThresholds) Over(money []MoneyTotal, unreadable int) []string {
	return t.OverWith(money, nil, unreadable)
}

// OverWith is Over for a reprocess of money by an operator who reprocessed earlier
// within ReprocessWindow without approval: each currency of money is compared with its
// threshold together with earlier's gross in it, and the line says how much of it came
// before ("EUR 1200.00 is above 1000.00, 900.00 of it reprocessed in the last 24
// hours"). A currency only earlier holds is not this reprocess's.
func (t ApprovalThresholds) OverWith(money, earlier []MoneyTotal, unreadable int) []string {
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
		g, places, gok := ParseDecimal(m.Gross)
		l, _, lok := ParseDecimal(limit)
		if !gok || !lok {
			continue
		}
		before := ""
		for _, e := range earlier {
			if e.Currency != m.Currency {
				continue
			}
			if eg, ep, ok := ParseDecimal(e.Gross); ok && eg.Sign() > 0 {
				g.Add(g, eg)
				places = max(places, ep)
				before = e.Gross
			}
		}
		if g.Cmp(l) > 0 {
			code := m.Currency
			if code == "" {
				code = "(no currency)"
			}
			line := fmt.Sprintf("%s %s is above %s", code, g.FloatString(places), limit)
			if before != "" {
				line += fmt.Sprintf(", %s of it reprocessed in the last %s", before, ReprocessWindowWords)
			}
			out = append(out, line)
		}
	}
	switch {
	case unreadable == 1:
		out = append(out, "1 amount is not a number")
	case unreadable > 1:
		out = append(out, fmt.Sprintf("%d amounts are not numbers", unreadable))
	}
	return out
}

// ReprocessWindowWords says ReprocessWindow in words.
var ReprocessWindowWords = fmt.Sprintf("%d hours", int(ReprocessWindow/time.Hour))

// MatchAmount reports whether amount's magnitude is within f's amount range. Sources
// write a refund as "-182.50" or as "182.50": compared with its sign, "refunds up to
// 100" would take in every negative refund, however large.
func (f BulkFilter) MatchAmount(amount string) bool {
	if f.AmountMin == "" && f.AmountMax == "" {
		return true
	}
	r, _, ok := ParseDecimal(amount)
	if !ok {
		return false
	}
	r.Abs(r)
	if lo, _, ok := ParseDecimal(f.AmountMin); ok && r.Cmp(lo) < 0 {
		return false
	}
	if hi, _, ok := ParseDecimal(f.AmountMax); ok && r.Cmp(hi) > 0 {
		return false
	}
	return true
}

// Describe is an action in words for its audit rows: "bulk action 7 (reprocess of 12
// keys, EUR 1200.00): reason".
func (a BulkAction) Describe(reason string) string {
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

// BulkBatch says what one batch of a running action did.
type BulkBatch struct {
	Changed int  // keys released or queued again in this batch
	Over    bool // the action is over (done or cancelled), or no longer this runner's
}

// ParseDecimal reads a plain decimal number ("-12.50") exactly, with the number of its
// decimal places; ok is false for anything else (exponents, fractions, spaces).
func ParseDecimal(s string) (r *big.Rat, places int, ok bool) {
	_, _, frac, plain := plainDecimal(s)
	if !plain {
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

// SumMoney sums the amounts of keys exactly, per currency (never across currencies),
// and counts the keys with no amount and those whose amount does not read as a number.
func SumMoney(keys []BulkKey) (money []MoneyTotal, noAmount, unreadable int) {
	sums := map[string]*moneySum{}
	for _, k := range keys {
		if k.Amount == "" {
			noAmount++
			continue
		}
		r, places, ok := ParseDecimal(k.Amount)
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

// AuditReason is the reason the audit row of each key a running action changes gives:
// the action's own, its number, and who approved it.
func (a BulkAction) AuditReason() string {
	reason := fmt.Sprintf("%s (bulk action %d", a.Reason, a.ID)
	if a.DecidedBy != "" {
		reason += ", approved by " + a.DecidedBy
	}
	return reason + ")"
}

// BulkTally counts the outcomes of a running action's keys.
type BulkTally struct{ Changed, Unchanged, Skipped, Refused int }

// Add counts one key's outcome.
func (t *BulkTally) Add(outcome string) {
	switch outcome {
	case BulkKeyChanged:
		t.Changed++
	case BulkKeyUnchanged:
		t.Unchanged++
	case BulkKeySkipped:
		t.Skipped++
	default:
		t.Refused++
	}
}

// ActOnBulkKey does action a to one of its keys, source's key as previewed p, inside the
// batch's transaction, and returns the key's outcome: skipped when it changed since the
// preview, or what release (the engine's ReleaseIn) did. c is the key's claim, held by
// the transaction when found; trace reads what is left of a swept one.
func ActOnBulkKey(a BulkAction, source, key string, p PreviewedClaim, c Claim, found bool, trace func() (Claim, error),
	release func(Release, int64) (Released, error, error), stuckBefore time.Time) (string, error) {
	skip, err := p.ChangedSincePreview(a.Kind, c, found, trace)
	if err != nil || skip {
		return BulkKeySkipped, err
	}
	// A key with no claim left expired and was swept since the preview (the sweep runs
	// every minute): the release forgets its trace and business keys as it does for a
	// release of the key alone, or refuses it. Checked as having no claim, a key
	// claimed anew in between is refused, not acted on.
	checked := MoneyNotChecked
	if !found {
		checked = 0
	}
	res, why, err := release(Release{Source: source, Key: key, Actor: a.RequestedBy, Reason: a.AuditReason(),
		Reprocess: a.Kind == BulkReprocess, StuckBefore: stuckBefore}, checked)
	switch {
	case err != nil:
		return "", err
	case why != nil:
		r, ok := RefusalOf(why)
		if !ok {
			return "", why
		}
		return string(r), nil
	case res.Changed:
		return BulkKeyChanged, nil
	}
	return BulkKeyUnchanged, nil
}
