package storage

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBusy means a key is being handed downstream: not stuck yet, or with an attempt
// under way. Releasing it could dispatch its event twice.
var ErrBusy = errors.New("key is being handed downstream")

// ErrPayloadGone means a key cannot be reprocessed: the payload that reprocessing would
// send again is no longer stored (retention removed it once the key was released,
// expired, or settled without a hand-off). Releasing the key still works: its next
// delivery is then accepted, with its own payload.
var ErrPayloadGone = errors.New("its payload is no longer stored")

// AlreadyFree reports whether releasing a key in state, its claim ending at expires,
// changes nothing at now: it is released, or settled (processed) and past its ttl. A
// failed key past its ttl is not: it stays stuck (listed, alerted on, never swept)
// until someone releases it; a processing one is held (Claim.Held).
func AlreadyFree(state string, expires, now time.Time) bool {
	return state == StateReleased || (state == StateProcessed && !expires.After(now))
}

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
	// Thresholds, when set, refuse a reprocess whose keys' money, together with what
	// Actor reprocessed without approval within ReprocessWindow, is above them
	// (NeedsApprovalError) before any key changes: a second operator approves such a
	// reprocess, as a bulk action. Otherwise the money of the keys named counts
	// towards Actor's next, also that of a key of a set then refused. Without them a
	// reprocess of one key, or of a set, would go round four-eyes.
	Thresholds ApprovalThresholds
}

// Busy refuses (ErrBusy) the release of c at now, a key processing since after
// stuckBefore or one with an attempt under way, stuck or not: a key retrying through
// an outage is stuck after stuck_after, and releasing or reprocessing it while an
// attempt is out would start a second hand-off beside it.
func Busy(c Claim, stuckBefore, now time.Time) error {
	switch {
	case c.State != StateProcessing:
		return nil
	case !c.UpdatedAt.Before(stuckBefore):
		return fmt.Errorf("%w (processing since %s)", ErrBusy, c.UpdatedAt.Format(time.RFC3339))
	case c.InFlight(now):
		return fmt.Errorf("%w (an attempt is under way; its lease ends at %s)", ErrBusy, c.LeasedUntil.Format(time.RFC3339))
	}
	return nil
}

// MoneyNotChecked is ClaimedAnew's checked for a release whose keys' money no four-eyes
// check read.
const MoneyNotChecked int64 = -1

// ClaimedAnew refuses, as a key in flight (ErrBusy), the reprocess of a key whose claim
// c no longer names checked, the delivery whose money a four-eyes check read before
// the release's transaction (0: the key had no claim then). Its key expired and was
// claimed by a delivery of another amount in between: sent again unchecked, that
// amount would go round the thresholds. Tried again, the release checks the new one.
func ClaimedAnew(c Claim, checked int64) error {
	if checked == MoneyNotChecked || c.FirstDelivery == checked {
		return nil
	}
	return fmt.Errorf("%w: claimed anew by delivery %d since its amount was checked; try again", ErrBusy, c.FirstDelivery)
}

// NeedsApprovalError is the refusal of a reprocess whose money is above
// Release.Thresholds; Over says by how much, a line per currency
// (ApprovalThresholds.Over).
type NeedsApprovalError struct{ Over []string }

func (e *NeedsApprovalError) Error() string {
	return "reprocess needs a second operator's approval: " + strings.Join(e.Over, ", ")
}

// Released says what a release did.
type Released struct {
	Previous string // the key's state before
	Changed  bool   // false when the key was already free: nothing was written
}

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
	// RefusedBusy: the key is being handed downstream: not stuck yet, or with an
	// attempt under way (ErrBusy).
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
		return "in flight: being handed downstream (not stuck yet, or an attempt under way); try again later"
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

// KeyRef names a key.
type KeyRef struct{ Source, Key string }

// MaxKeysPerRelease bounds the keys one ReleaseKeys call releases: a larger set is
// released in several calls, each told that it may have stopped short (ReachedLimit).
const MaxKeysPerRelease = 10000

// ReachedLimit reports whether a ReleaseKeys call that matched matched keys stopped at
// MaxKeysPerRelease: more keys may match its filter, for another call to release.
func ReachedLimit(matched int) bool { return matched >= MaxKeysPerRelease }
