package storage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// KeyFilter selects keys for ListKeys.
type KeyFilter struct {
	Source string // "" = every source
	State  string // "" = every state
	// Stuck selects only stuck keys: failed, or processing since before StuckBefore.
	Stuck       bool
	StuckBefore time.Time
	// Before is the keyset cursor of the listings newest first: keys with a smaller id
	// than this (0 = from the newest). A stuck listing pages by After instead.
	Before int64
	// After is the keyset cursor of a stuck listing, which comes oldest first: the keys
	// after this one in (UpdatedAt, ID) order (zero = from the longest stuck).
	After KeyCursor
	Limit int // default 100
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
	if f.Stuck && f.Before != 0 {
		return errors.New("before with stuck: a stuck listing goes on from after, the cursor its next page gives")
	}
	if !f.Stuck && !f.After.IsZero() {
		return errors.New("after without stuck: only a stuck listing goes on from after; the others from before")
	}
	return nil
}

// StuckOf is how many keys of source ("" for every source) counts, StuckCounts's
// answer, holds.
func StuckOf(counts map[string]int, source string) int {
	n := 0
	for name, c := range counts {
		if source == "" || name == source {
			n += c
		}
	}
	return n
}

// BecameStuck is how many keys of source ("" for every source) became stuck during a
// pass through the stuck keys: stuck by now, StuckCounts at the current threshold, and
// not by then, StuckCounts at the pass's own (KeyCursor.StuckBefore). They fall among
// the keys the pass had paged already, and its last page says so: the next pass, from
// the first page, lists them.
func BecameStuck(now, then map[string]int, source string) int {
	return max(StuckOf(now, source)-StuckOf(then, source), 0)
}

// KeyCursor is a place in a stuck listing: its last key's time of entering its state,
// and its id. Stuck keys come oldest first, and many may share one millisecond (a
// batch's keys, claimed together and failing together); the id orders those, so that
// the next page starts exactly after the last key shown. Being values rather than a
// row, a cursor stays good when its key changes state or is released.
//
// StuckBefore is the pass's own: every page of it takes the first page's, so that all
// agree on which keys are stuck. A processing key that passed stuck_after meanwhile
// would otherwise fall among the keys a page before had passed, and no page would show
// it; it comes in the next pass, from the first page.
type KeyCursor struct {
	UpdatedAt   time.Time
	ID          int64
	StuckBefore time.Time
}

// IsZero reports whether c is no cursor: the first page.
func (c KeyCursor) IsZero() bool { return c.ID == 0 }

// String is c as the console's links and the API carry it, which ParseKeyCursor reads
// ("" for no cursor): updated_at is stored in milliseconds, so the round trip is exact.
func (c KeyCursor) String() string {
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.UpdatedAt.UnixMilli(), 10) + "." + strconv.FormatInt(c.ID, 10) + "." +
		strconv.FormatInt(c.StuckBefore.UnixMilli(), 10)
}

// ParseKeyCursor reads a cursor that KeyCursor.String wrote. Its error says what is
// wrong with s without naming where it came from: the caller names the parameter.
func ParseKeyCursor(s string) (KeyCursor, error) {
	parts := strings.Split(s, ".")
	bad := fmt.Errorf("%q is not a cursor of a stuck listing: pass on the next of the page before", s)
	if len(parts) != 3 || strings.ContainsAny(s, "+-") {
		return KeyCursor{}, bad
	}
	var n [3]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 {
			return KeyCursor{}, bad
		}
		n[i] = v
	}
	if n[1] == 0 {
		return KeyCursor{}, bad
	}
	return KeyCursor{UpdatedAt: time.UnixMilli(n[0]).UTC(), ID: n[1], StuckBefore: time.UnixMilli(n[2]).UTC()}, nil
}

// KeyPage is one page of a keys listing.
type KeyPage struct {
	Keys []Claim
	// Next is the cursor of the following page (KeyFilter.Before), 0 when there is
	// none. A stuck listing gives After instead.
	Next int64
	// After is the cursor of the page following a stuck listing's (KeyFilter.After),
	// zero when there is none.
	After KeyCursor
	// Partial is true when the page was cut short to stay fast: the filter needs a look
	// at each claim, and only ScanWindow claims were looked at. Next goes on from there.
	Partial bool
}

// PageOfKeys makes the page of a keys listing by f from claims, the claims read for it:
// at most f.Limit and one more, which says that another page follows. from is where a
// listing that looks at each claim began its window of ScanWindow claims (0: it looked
// at all of them): fewer than a page found there, older claims may match.
func PageOfKeys(claims []Claim, f KeyFilter, from int64) KeyPage {
	var page KeyPage
	if len(claims) > f.Limit {
		page.Keys = claims[:f.Limit]
		last := page.Keys[f.Limit-1]
		if f.Stuck {
			page.After = KeyCursor{UpdatedAt: last.UpdatedAt, ID: last.ID, StuckBefore: f.StuckBefore}
		} else {
			page.Next = last.ID
		}
		return page
	}
	page.Keys = claims
	if from > 0 {
		page.Next, page.Partial = from, true
	}
	return page
}
