package storage

import (
	"fmt"
	"time"
)

// SuspectKind names why an accepted delivery is suspected of doubling another.
type SuspectKind string

// The kinds of suspect.
const (
	// SuspectBusinessKey: its business key equals another accepted delivery's of the same
	// source within the source's business window, under a different event id.
	SuspectBusinessKey SuspectKind = "business_key"
	// SuspectCorrelation: a correlation rule found the same booking, amount and currency
	// through another of its sources within its window (a suspected double refund).
	SuspectCorrelation SuspectKind = "correlation"
	// SuspectLateDuplicate: its key was claimed before and that claim has expired.
	SuspectLateDuplicate SuspectKind = "late_duplicate"
)

// Review states of a suspect.
const (
	SuspectOpen      = "open"      // not reviewed yet
	SuspectConfirmed = "confirmed" // an operator confirmed it is a double
	SuspectDismissed = "dismissed" // an operator found it is not a double
)

// CheckFlag says what is wrong with kind and state as a filter of flags, naming the
// field ("" for any; kind FlagAny for a flag of any kind), or returns nil.
func CheckFlag(kind SuspectKind, state string) error {
	switch kind {
	case "", FlagAny, SuspectBusinessKey, SuspectCorrelation, SuspectLateDuplicate:
	default:
		return fmt.Errorf("flag %q: want any, business_key, correlation or late_duplicate", kind)
	}
	switch state {
	case "", SuspectOpen, SuspectConfirmed, SuspectDismissed:
	default:
		return fmt.Errorf("flag_state %q: want open, confirmed or dismissed", state)
	}
	return nil
}

// Suspect is one flag on an accepted delivery, linking it to the delivery it may double.
type Suspect struct {
	ID          int64
	Kind        SuspectKind
	Delivery    int64 // the delivery flagged
	Other       int64 // the delivery it doubles; 0 when unknown
	Source      string
	OtherSource string
	Rule        string // the correlation rule's name
	Property    string
	Booking     string
	Amount      string // major units, as Delivery.Amount
	Currency    string
	FirstSeen   time.Time // late duplicates: when the key was first claimed
	FlaggedAt   time.Time
	State       string // SuspectOpen, SuspectConfirmed or SuspectDismissed
	ReviewedBy  string
	ReviewedAt  time.Time
	Reason      string
}
