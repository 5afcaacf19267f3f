package storage

import (
	"fmt"
	"strings"
	"time"
)

// Outcome is what became of a delivery.
type Outcome string

// The outcomes of a delivery.
const (
	Accepted  Outcome = "accepted"  // it won its key's claim
	Duplicate Outcome = "duplicate" // its key was already claimed
	Rejected  Outcome = "rejected"  // it failed a check before any claim
)

// Label is a label (a delivery's property, booking or event status) as it is stored, and
// a filter typed for one as it is matched: without the spaces, tabs and line breaks
// around it, which a user types or pastes by accident and a browser drops from a text
// box's value (line breaks), so that a ledger row's link, and the console's form sent
// again, find the row's deliveries. Other blanks (U+00A0, U+3000) are kept, in both:
// they are part of the value, which the console shows (views.Visible), a form keeps
// and a filter matches exactly.
func Label(s string) string { return strings.Trim(s, " \t\r\n") }

// MaxJSONDepth is how deeply arrays and objects may nest in a body intake reads:
// webhook payloads are a few levels deep. A deeper body is refused; stored as a
// rejection's, it is shown and given as text, not indented as JSON, whose indentation
// grows with the square of the depth.
const MaxJSONDepth = 64

// Delivery is one HTTP delivery of a webhook, as received and as stored.
type Delivery struct {
	ID         int64
	Source     string
	ReceivedAt time.Time // set by Record from the Store's clock when zero
	Outcome    Outcome   // Rejected on input records a rejection; otherwise Record decides
	Status     int       // the HTTP status answered; set by Record's caller
	Error      string    // why it was rejected

	Key          string
	KeyMethod    string // "event_id" or "derived"
	KeyFrom      string // the pointer or header an event id came from
	KeyCanonical string // the canonical JSON a derived key hashes
	PayloadHash  string

	Mismatch      bool  // a duplicate whose payload differs from the first delivery's
	FirstDelivery int64 // for a duplicate: the delivery that won the claim

	// Business fields read from the body, for the console's filters and sums. Amount is
	// in major units ("412.50"); Currency is its code in upper case, "" when the source
	// reads none.
	Property, Booking, EventStatus, Amount string
	Currency                               string

	RemoteAddr  string
	ContentType string
	Headers     map[string][]string // the request's headers, as an http.Header holds them
	Body        []byte

	// Batch is the id of the first item delivery of the request this delivery came in,
	// when that request carried several events (RecordBatch), and 0 otherwise;
	// BatchIndex is its place in the request, from 0. RecordBatch sets both.
	Batch      int64
	BatchIndex int
	// BatchEnvelope is what the request held besides its events, for an item of a
	// batched request: the request's JSON with the array of events taken out, compact
	// (every other value as the sender wrote it); "" for a delivery that came alone.
	// RecordBatch stores each item's as given. An item stored without one, past the
	// first, is read with its first item's (Delivery, KeyDeliveries, LeaseDue): intake
	// stores the envelope once, with the first item, as a request's headers are, since a
	// copy with each of a thousand items would cost a thousand times its size.
	BatchEnvelope string

	// Forensics (forensics.go). BusinessKey is the hex SHA-256 of the canonical JSON of
	// the source's business key fields, "" when it has none or a field is absent;
	// Correlations are what each correlation rule the source takes part in reads of it.
	BusinessKey  string
	Correlations []CorrelationKey
	// Set by Record: MoneyMismatch marks a duplicate whose amount, currency or event
	// status differs from its first delivery's; Suspects are the flags an accepted
	// delivery was given.
	MoneyMismatch bool
	Suspects      []SuspectKind
}

// ClaimOptions says how a delivery's key is claimed.
type ClaimOptions struct {
	// TTL is the dedup window: the claim expires this long after it is made.
	TTL time.Duration
	// Dispatch marks the event for hand-off downstream (state processing); without it
	// the key goes straight to processed.
	Dispatch bool
	// BusinessWindow is how far back an accepted delivery's business key is looked for
	// (0: not at all); BusinessBlocks makes a delivery whose business key is found a
	// duplicate of the delivery found, instead of an accepted suspect (forensics.go).
	BusinessWindow time.Duration
	BusinessBlocks bool
}

// Key states.
const (
	StateProcessing = "processing"
	StateProcessed  = "processed"
	StateFailed     = "failed"
	StateReleased   = "released"
)

// CheckState says what is wrong with state as a filter of keys ("" for any state), or
// returns nil: a misspelt one would match nothing, and an empty list would read as
// "none is in that state".
func CheckState(state string) error {
	switch state {
	case "", StateProcessing, StateProcessed, StateFailed, StateReleased:
		return nil
	}
	return fmt.Errorf("state %q: want processing, processed, failed or released", state)
}

// stepBackSlack is how far a clock may have been set back and a delivery still be
// stamped no earlier than the one stored before it (ReceivedAfter).
const stepBackSlack = time.Hour

// ReceivedAfter is the receipt time to store for a delivery received at at, stored
// right after one stamped last: at, or last when at is before it by no more than
// stepBackSlack. A clock set back (NTP correcting one that ran fast) would otherwise
// stamp deliveries earlier than those stored before them, and receipt times that grow
// with ids are what the engines find a time range by, without an index of them: the
// events of a day, the retention sweep's end. A larger step is a clock that was wrong
// by more than a correction, and is left as it was.
func ReceivedAfter(at, last time.Time) time.Time {
	if at.Before(last) && last.Sub(at) <= stepBackSlack {
		return last
	}
	return at
}
