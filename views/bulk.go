package views

// BulkForm is the filter, kind and reason of a bulk action as the form holds them.
type BulkForm struct {
	Kind, Reason                   string
	Source, Key, State             string
	From, To                       TimeBound
	Property, Booking, Status      string
	Flag, FlagState                string
	Currency, AmountMin, AmountMax string
}

// Bulk is the bulk actions page: the form that makes a preview, and recent actions.
type Bulk struct {
	Page       Page
	Form       BulkForm
	Sources    []string
	Error      string
	CanAct     bool     // operator: may make previews
	Thresholds []string // the approval thresholds in words ("EUR 1,000.00")
	Actions    []BulkRow
	Pending    int    // actions waiting for approval, all of them, listed or not
	NextURL    string // the page of older actions; "" on the last
	NewestURL  string // the first page, from a later one
}

// BulkRow is one bulk action in a list.
type BulkRow struct {
	ID                    int64
	URL                   string
	Kind, State           string
	StateLabel            string
	RequestedBy           string
	Created, CreatedTitle string
	Total                 int
	Progress              string // "12 / 40"
	Money                 []MoneySum
}

// BulkMoney is the money of an action's keys in one currency: Sum as signed, Gross
// as moved (refunds and charges alike).
type BulkMoney struct {
	Currency   string
	Keys       int
	Sum, Gross string
}

// BulkKeyRow is one key of an action's sample.
type BulkKeyRow struct {
	Source, Key, KeyShort string
	State, Amount         string
	Outcome               string
	URL                   string
}

// BulkDetail is one bulk action: its preview, then its progress, and what the viewer
// may do with it.
type BulkDetail struct {
	Page   Page
	Row    BulkRow
	Reason string
	Filter []string
	Money  []BulkMoney
	// Expired: of a release's keys, those past their ttl, whose traces and business
	// keys it forgets.
	Expired                                    int
	NoAmount, Unreadable                       int
	LeftOut                                    []string
	NeedsApproval                              bool
	Over                                       []string // the thresholds its money is above
	Done, Changed, Unchanged, Skipped, Refused int
	Percent                                    int
	LastError                                  string
	DecidedBy, DecisionReason, CancelledBy     string
	CancelRequested                            bool
	Sample                                     []BulkKeyRow
	CanStart, CanCancel, CanDecide             bool
	// Stale: a preview, or a start awaiting approval, whose preview is too old to be
	// started or approved (it may still be refused or cancelled).
	Stale bool
	// OwnPending: the viewer requested this action, which waits for someone else.
	OwnPending bool
}

// BulkPending lists the actions waiting for a second operator's approval.
type BulkPending struct {
	Page      Page
	Rows      []BulkRow
	Total     int    // actions waiting for approval, all of them, listed or not
	NextURL   string // the page of older actions; "" on the last
	NewestURL string // the first page, from a later one
}
