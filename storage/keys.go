package storage

import (
	"fmt"
	"time"
)

// KeyFilter selects keys for ListKeys.
type KeyFilter struct {
	Source string // "" = every source
	State  string // "" = every state
	// Stuck selects only stuck keys: failed, or processing since before StuckBefore.
	Stuck       bool
	StuckBefore time.Time
	Before      int64 // keyset cursor: keys with a smaller id than this (0 = from the newest)
	Limit       int   // default 100
}

// Check says what is wrong with f, naming the setting, or returns nil: a state that
// is none, or stuck with a state no stuck key is in, would match nothing and read as
// "no keys" (or a release of none) rather than as the mistake it is.
func (f KeyFilter) Check() error {
	if err := CheckState(f.State); err != nil {
		return err
	}
	if f.Stuck && f.State != "" && f.State != StateFailed && f.State != StateProcessing {
		return fmt.Errorf("stuck with state %q: a stuck key is failed, or processing for too long", f.State)
	}
	return nil
}

// KeyPage is one page of a keys listing.
type KeyPage struct {
	Keys []Claim
	// Next is the cursor of the following page (KeyFilter.Before), 0 when there is
	// none. Stuck listings have no next page.
	Next int64
	// Partial is true when the page was cut short to stay fast: the filter needs a look
	// at each claim, and only ScanWindow claims were looked at. Next goes on from there.
	Partial bool
}
