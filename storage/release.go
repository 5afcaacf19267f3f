package storage

import (
	"context"
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

// ReleaseTx is one engine's transaction as ReleaseIn uses it: the reads and writes of a
// release, each in the engine's own SQL. Every method's error fails the transaction.
type ReleaseTx interface {
	// Now is the engine's clock.
	Now() time.Time
	// LockedClaim reads the claim of source's key, held against every other writer of it
	// until the transaction ends; found is false when the key has no claim.
	LockedClaim(ctx context.Context, source, key string) (c Claim, found bool, err error)
	// SweptClaim is what is left of the claim of a key expired and swept: its source and
	// key, and, from its trace (if it left one), its first delivery and when it was
	// claimed, which its business key was stored under.
	SweptClaim(ctx context.Context, source, key string) (Claim, error)
	// Forget deletes what would make c's key's next deliveries doubles (its trace and
	// the business keys of its deliveries), and says how many rows that was.
	Forget(ctx context.Context, c Claim) (int64, error)
	// PayloadGone says why c's payload cannot be sent again, or "" when it can: the
	// delivery its claim names must be stored, and be of c's own source and key.
	PayloadGone(ctx context.Context, c Claim) (string, error)
	// RecordInterrupted records the attempt of c that its lease outlived
	// (AttemptInterrupted), when one did at now.
	RecordInterrupted(ctx context.Context, c Claim, now time.Time) error
	// Requeue claims c's key again, processing from now until expires, for ttl.
	Requeue(ctx context.Context, c Claim, now, expires time.Time, ttl time.Duration) error
	// MarkReleased frees c's key.
	MarkReleased(ctx context.Context, c Claim, now time.Time) error
	// Audit writes e to the audit log.
	Audit(ctx context.Context, e AuditEntry) error
}

// ReleaseIn releases (or reprocesses) r's key inside tx, with its audit row. A refusal
// (no such key, a key in flight or claimed anew since checked, a reprocess without a
// payload) comes back as refused, wrapping ErrNotFound, ErrBusy or ErrPayloadGone,
// with nothing written; err means the transaction failed and must be rolled back.
// checked is the delivery whose money a four-eyes check read, or MoneyNotChecked. The
// caller has checked that r has a reason.
//
// A write that records an interrupted hand-off comes only once the release is certain
// to go ahead: a refused one writes nothing (the bulk actions commit the keys of a
// batch that were not refused), and the next lease would record the same hand-off
// again.
func ReleaseIn(ctx context.Context, tx ReleaseTx, r Release, checked int64) (out Released, refused, err error) {
	failed := func(err error) (Released, error, error) {
		return Released{}, nil, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	c, found, err := tx.LockedClaim(ctx, r.Source, r.Key)
	if err != nil {
		return failed(err)
	}
	if !found {
		if !r.Reprocess {
			// Expired and swept, the key left a trace, and its deliveries their
			// business keys: released, they are forgotten, as for a key not yet swept.
			gone, err := tx.SweptClaim(ctx, r.Source, r.Key)
			if err != nil {
				return failed(err)
			}
			out, err := releaseFreeKey(ctx, tx, r, gone, tx.Now())
			if err != nil || out.Changed {
				return out, nil, err
			}
		}
		return Released{}, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, ErrNotFound), nil
	}
	if err := ClaimedAnew(c, checked); err != nil {
		return Released{Previous: c.State}, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err), nil
	}
	now := tx.Now()
	out = Released{Previous: c.State}
	free := AlreadyFree(c.State, c.ExpiresAt, now)
	if free && c.State != StateReleased {
		out.Previous = "expired"
	}
	if free && !r.Reprocess {
		if c.State == StateReleased {
			return out, nil, nil
		}
		// Past its ttl the key is free, but its trace and business keys would still
		// flag, or block, a re-send of its event: released, they are forgotten.
		out, err := releaseFreeKey(ctx, tx, r, c, now)
		return out, nil, err
	}
	if err := Busy(c, r.StuckBefore, now); err != nil {
		return out, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err), nil
	}
	action := "release"
	if r.Reprocess {
		action = "reprocess"
		// The payload is checked here, in the transaction that queues the key, so that
		// no sweep can remove it in between (a processing key's payload is kept).
		// Without it the dispatcher could only fail the key.
		gone, perr := tx.PayloadGone(ctx, c)
		if perr != nil {
			return failed(perr)
		}
		if gone != "" {
			return out, fmt.Errorf("release %s/%s: cannot reprocess: %w (%s); release the key instead, so that its next delivery is accepted",
				r.Source, r.Key, ErrPayloadGone, gone), nil
		}
		// Reprocessing claims the key again for as long as its first claim lasted.
		expires, ttl := c.Reprocessed(now)
		err = tx.RecordInterrupted(ctx, c, now)
		if err == nil {
			err = tx.Requeue(ctx, c, now, expires, ttl)
		}
	} else {
		err = tx.MarkReleased(ctx, c, now)
		if err == nil {
			_, err = tx.Forget(ctx, c)
		}
		if err == nil {
			err = tx.RecordInterrupted(ctx, c, now)
		}
	}
	if err != nil {
		return failed(err)
	}
	if err := tx.Audit(ctx, AuditEntry{At: now, Actor: r.Actor, Action: action, Source: r.Source, Key: r.Key,
		Reason: r.Reason, PreviousState: out.Previous}); err != nil {
		return failed(err)
	}
	out.Changed = true
	return out, nil, nil
}

// releaseFreeKey releases c, a key already free (past its ttl, or expired and swept:
// then c names only its source and key): it forgets c's trace and business keys, and
// audits that, when there were any; otherwise it changes nothing.
func releaseFreeKey(ctx context.Context, tx ReleaseTx, r Release, c Claim, now time.Time) (Released, error) {
	out := Released{Previous: "expired"}
	n, err := tx.Forget(ctx, c)
	if err != nil {
		return Released{}, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	if n == 0 {
		return out, nil
	}
	if err := tx.Audit(ctx, AuditEntry{At: now, Actor: r.Actor, Action: "release", Source: r.Source, Key: r.Key,
		Reason: r.Reason, PreviousState: out.Previous}); err != nil {
		return Released{}, fmt.Errorf("release %s/%s: %w", r.Source, r.Key, err)
	}
	out.Changed = true
	return out, nil
}
