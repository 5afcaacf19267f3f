package storage

import (
	"cmp"
	"errors"
	"slices"
	"time"
)

// ErrInvalidReview means a review was refused for what it said: a state other than
// confirmed or dismissed, or no reason.
var ErrInvalidReview = errors.New("invalid review")

// ErrReviewedMeanwhile means a review was refused because the suspect is no longer in
// the state its reviewer saw: another review changed it since.
var ErrReviewedMeanwhile = errors.New("reviewed meanwhile")

// SuspectFilter selects suspects. Empty fields match everything.
type SuspectFilter struct {
	// Delivery selects the suspects that name this delivery, as the one flagged or as
	// the other one it may double.
	Delivery int64
	Kind     SuspectKind
	State    string    // SuspectOpen, SuspectConfirmed or SuspectDismissed
	Source   string    // the flagged delivery's source
	From, To time.Time // flagged at or after From, before To (zero = unbounded)

	// Before is the keyset cursor: suspects with a smaller id (0 = from the newest).
	Before int64
	// Limit is the page size; default 50.
	Limit int
}

// SuspectPage is one page of suspects, newest first.
type SuspectPage struct {
	Suspects []Suspect
	// Next is the cursor of the following page (SuspectFilter.Before), 0 when there is none.
	Next int64
}

// SuspectCount is the suspects of one kind, state and currency: how many, and the money
// of their deliveries, each delivery once however many suspects of the kind and state
// it carries (two rules flagging one refund put one refund at stake), as the ledger
// counts it.
type SuspectCount struct {
	Kind     SuspectKind
	State    string
	Currency string
	Suspects int64 // how many suspects
	Money    Money // Count is how many deliveries; Minor their amounts, in minor units of Currency
}

// SuspectSums sums suspects by kind, state and currency, as SuspectCounts answers: an
// engine adds the rows of its running totals and the suspects after their mark, in any
// order.
type SuspectSums map[suspectCountKey]*SuspectTotal

type suspectCountKey struct{ kind, state, currency string }

// At returns the sum of kind, state and currency, added to s if it was not there.
func (s SuspectSums) At(kind, state, currency string) *SuspectTotal {
	k := suspectCountKey{kind, state, currency}
	t := s[k]
	if t == nil {
		t = &SuspectTotal{}
		s[k] = t
	}
	return t
}

// Counts returns s as SuspectCounts does: by kind, state and currency, no currency
// last (the ledger's order of currencies), without the sums whose every suspect was
// reviewed into another state.
func (s SuspectSums) Counts() []SuspectCount {
	out := make([]SuspectCount, 0, len(s))
	for k, t := range s {
		if t.Count == 0 {
			continue
		}
		out = append(out, SuspectCount{Kind: SuspectKind(k.kind), State: k.state, Currency: k.currency, Suspects: t.Count, Money: t.Money()})
	}
	slices.SortFunc(out, func(a, b SuspectCount) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.State, b.State), CompareCurrency(a.Currency, b.Currency))
	})
	return out
}

// SuspectTotal is the money of the suspects of one source, kind, state and currency as
// the engines keep it in their running totals (suspect_totals): amounts are added as
// suspects are folded in and taken away again as a review moves a suspect to another
// state, so the sum must come back exactly to what it was. An int64 of minor units
// cannot promise that (a sum that overflowed once is no longer known), so the amounts
// are kept in two parts, neither of which can overflow before a billion suspects: High
// sums each amount's whole billions of minor units, Low the rest. Money puts them
// together.
type SuspectTotal struct {
	Count    int64
	High     int64 // the sum of each amount / 1e9 (minor units, truncated)
	Low      int64 // the sum of each amount % 1e9
	Unsummed int64 // as Money.Unsummed: amounts that are no exact number of minor units
	NoAmount int64 // as Money.NoAmount: suspects that carried no amount
	// Repeats counts the suspects, in Count, whose delivery an earlier suspect of the
	// same kind and state counts already: their money is not added again.
	Repeats int64
}

// minorSplit is where SuspectTotal splits an amount in minor units.
const minorSplit = 1_000_000_000

// AddAmount counts one suspect of amount (major units, "" for none) in currency, by its
// magnitude (MoneyMinor), or, with sign -1, takes one away: what a review moves out of
// a state's total.
func (t *SuspectTotal) AddAmount(amount, currency string, sign int64) {
	t.Count += sign
	if amount == "" {
		t.NoAmount += sign
		return
	}
	n, ok := MoneyMinor(amount, currency)
	if !ok {
		t.Unsummed += sign
		return
	}
	t.High += sign * (n / minorSplit)
	t.Low += sign * (n % minorSplit)
}

// AddRepeat counts one suspect whose delivery's money another suspect of its kind and
// state counts, or, with sign -1, takes one away.
func (t *SuspectTotal) AddRepeat(sign int64) {
	t.Count += sign
	t.Repeats += sign
}

// AddSuspect counts one suspect, or takes it away with sign -1: a repeat (its
// delivery's money counted already by another suspect of its kind and state) by its
// count alone (AddRepeat), any other with its amount (AddAmount).
func (t *SuspectTotal) AddSuspect(amount, currency string, repeat bool, sign int64) {
	if repeat {
		t.AddRepeat(sign)
		return
	}
	t.AddAmount(amount, currency, sign)
}

// Add adds o to t.
func (t *SuspectTotal) Add(o SuspectTotal) {
	t.Count += o.Count
	t.Repeats += o.Repeats
	t.High += o.High
	t.Low += o.Low
	t.Unsummed += o.Unsummed
	t.NoAmount += o.NoAmount
}

// Money is t as the console shows it: the amounts summed in minor units when the sum
// fits an int64; otherwise, as the ledger reads a total too large, every suspect that
// carried an amount is counted as unsummed.
func (t SuspectTotal) Money() Money {
	n := t.Count - t.Repeats // the deliveries
	return Money{Count: n, Unsummed: t.Unsummed, NoAmount: t.NoAmount}.SplitSum(t.High, t.Low)
}
