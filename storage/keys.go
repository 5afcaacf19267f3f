package storage

import (
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
