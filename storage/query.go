package storage

import (
	"time"
)

// Claim is the state of one source's key.
type Claim struct {
	ID            int64
	Source        string
	Key           string
	State         string
	FirstDelivery int64
	PayloadHash   string
	ClaimedAt     time.Time
	ExpiresAt     time.Time
	UpdatedAt     time.Time
	Attempts      int
	NextAttemptAt time.Time // zero when nothing is due
	LastError     string
	// TTL is the window the key was claimed for, stored once a reprocess moves
	// ExpiresAt; zero while ExpiresAt - ClaimedAt tells it.
	TTL time.Duration
	// LeasedUntil is when the key's last dispatch lease ends (zero if it was never
	// leased). A lease sets NextAttemptAt to the same time and the attempt's end moves
	// NextAttemptAt on, so the two are equal only while an attempt is in flight.
	LeasedUntil time.Time
}

// InFlight reports whether c is being handed downstream at now: a dispatcher holds its
// lease and has not yet recorded the attempt. Releasing or reprocessing it then would
// let a second hand-off start beside the first.
func (c Claim) InFlight(now time.Time) bool {
	return c.State == StateProcessing && !c.LeasedUntil.IsZero() && c.LeasedUntil.Equal(c.NextAttemptAt) && c.LeasedUntil.After(now)
}

// Interrupted reports whether c's last lease ran out by now with its attempt never
// recorded (see AttemptInterrupted). The engines' LeaseDue read the same condition in
// SQL: next_attempt_at = leased_until on a due key.
func (c Claim) Interrupted(now time.Time) bool {
	return c.State == StateProcessing && !c.LeasedUntil.IsZero() && c.LeasedUntil.Equal(c.NextAttemptAt) && !c.LeasedUntil.After(now)
}

// OwnsAttempt reports whether a, the last attempt of c's key, is one of c's own
// hand-offs. With attempts counted it is. Without, it may still be: an interrupted
// hand-off is not counted (a crash loop must not fail the key), nor is the late outcome
// that takes its place. Such an attempt is of the claim's first delivery and started
// after UpdatedAt, which only a claim or a reprocess moves while Attempts is 0: an
// earlier claim's attempt is of another delivery, and one from before a reprocess
// started by then (a reprocess waits for an attempt in flight).
func (c Claim) OwnsAttempt(a Attempt) bool {
	return c.Attempts > 0 || a.Delivery == c.FirstDelivery && a.StartedAt.After(c.UpdatedAt)
}

// MayOwnAttempt reports whether c can have an attempt of its own (OwnsAttempt): one
// counted, or a lease taken since it was claimed or reprocessed.
func (c Claim) MayOwnAttempt() bool {
	return c.Attempts > 0 || c.LeasedUntil.After(c.UpdatedAt)
}

// NotALease is when a key set due at due is due instead: a millisecond later if due is,
// to the millisecond the engines keep, the end of its last lease, which would read as
// an attempt in flight, or interrupted.
func NotALease(due, leasedUntil time.Time) time.Time {
	if due.UnixMilli() == leasedUntil.UnixMilli() {
		return due.Add(time.Millisecond)
	}
	return due
}

// Reprocessed is the expiry and the window a reprocess at now gives c: a live claim
// keeps its expiry; an expired one holds its key for its window again from now.
// ClaimedAt stays (it is the job's generation and its business key's seen time), so
// the window is stored rather than read again from ExpiresAt - ClaimedAt, which each
// reprocess of an expired key would lengthen by the key's age.
func (c Claim) Reprocessed(now time.Time) (expires time.Time, ttl time.Duration) {
	ttl = c.TTL
	if ttl == 0 {
		ttl = c.ExpiresAt.Sub(c.ClaimedAt)
	}
	if c.ExpiresAt.After(now) {
		return c.ExpiresAt, ttl
	}
	return now.Add(ttl), ttl
}

// Held reports whether the claim still holds its key: a new delivery of the key now
// would be a duplicate. A key being handed downstream is held past its expiry, as
// intake's claim never takes it over: a second hand-off could run beside the first.
func (c Claim) Held(now time.Time) bool {
	return c.State == StateProcessing || (c.State != StateReleased && c.ExpiresAt.After(now))
}

// PreviewedClaim is a key's claim as a bulk action's preview saw it: its id, state,
// time of entering that state (milliseconds) and first delivery (nil: previewed by an
// earlier version, and swept or changed before the upgrade).
type PreviewedClaim struct {
	ID        int64
	State     string
	UpdatedAt int64
	First     *int64
}

// ChangedSincePreview reports whether a key previewed as p changed since, for an action
// of kind: its claim c, when found, is another or in another state; or, for a release,
// its claim is gone and the trace left, read by trace, is of a later claim of the key
// (ClaimedAnewSincePreview). A reprocess needs no trace: it refuses a swept key.
func (p PreviewedClaim) ChangedSincePreview(kind string, c Claim, found bool, trace func() (Claim, error)) (bool, error) {
	switch {
	case found:
		return c.ID != p.ID || c.State != p.State || c.UpdatedAt.UnixMilli() != p.UpdatedAt, nil
	case kind != BulkRelease:
		return false, nil
	}
	gone, err := trace()
	if err != nil {
		return false, err
	}
	return gone.ClaimedAnewSincePreview(p.First), nil
}

// ClaimedAnewSincePreview reports whether c, what is left of a swept claim (its trace),
// is of a claim other than the one a bulk action's preview listed, whose first delivery
// was previewedFirst: the previewed claim was swept, the key claimed anew and that claim
// swept too, and a release by the action must not forget the newer claim's trace and
// business keys, which no preview showed. Delivery ids tell the claims apart, as times
// cannot: a claim's time is its delivery's arrival, stamped before it waited for the
// writer and on whichever replica's clock took it, so a newer claim can be stamped
// before the preview and the previewed one after it. Where the preview's first
// delivery is not known (nil: previewed by an earlier version, and swept or changed
// before the upgrade), any trace may be a newer claim's, and the key is skipped, which
// forgets nothing.
func (c Claim) ClaimedAnewSincePreview(previewedFirst *int64) bool {
	return c.FirstDelivery != 0 && (previewedFirst == nil || c.FirstDelivery != *previewedFirst)
}

// Stuck reports whether the key is stuck: failed, or processing since before
// stuckBefore. sqlStuck selects the same keys in SQL.
func (c Claim) Stuck(stuckBefore time.Time) bool {
	return c.State == StateFailed || (c.State == StateProcessing && c.UpdatedAt.Before(stuckBefore))
}
