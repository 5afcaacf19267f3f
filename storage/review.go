package storage

import (
	"errors"
	"time"
)

// ErrInvalidReview means a review was refused for what it said: a state other than
// confirmed or dismissed, or no reason.
var ErrInvalidReview = errors.New("invalid review")

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

// SuspectCount is the suspects of one kind, state and currency: how many, and their
// money.
type SuspectCount struct {
	Kind     SuspectKind
	State    string
	Currency string
	Money    Money // Count is how many; Minor their amounts, in minor units of Currency
}
