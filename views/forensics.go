package views

// FlagBadge is a suspect as a list shows it beside a delivery.
type FlagBadge struct {
	Kind  string // business_key, correlation or late_duplicate
	Label string // in words: "suspected duplicate"
	State string // open, confirmed or dismissed
	Title string // a sentence for the pointer: which delivery it may double
	URL   string // the flags on the delivery's page
}

// FlagItem is one suspect on a delivery's page.
type FlagItem struct {
	ID           int64
	Kind, Label  string
	State        string
	Flagged      bool   // this delivery is the one flagged; false: it is the other
	Explain      string // what the flag says, in a sentence
	OtherID      int64  // the other delivery (0: unknown, a late duplicate whose first is gone)
	OtherURL     string
	OtherSwept   bool // OtherID is known, but retention swept it: no page to link to
	OtherSource  string
	Rule         string
	Amount       string // with its currency
	FirstSeen    string // late duplicates: when the key was first seen
	FlaggedAt    string
	ReviewedBy   string
	ReviewedAt   string
	Reason       string
	Return       string // where the review form comes back to
	ReviewAction string // the review form's action
}

// SuspectKindStats is the suspects of one kind: how many in each state, and the money
// of the open ones (at stake) and of the confirmed ones, per currency.
type SuspectKindStats struct {
	Kind, Label                   string
	Open, Confirmed, Dismissed    int64
	OpenMoney, ConfirmedMoney     []MoneySum
	OpenURL, ConfirmedURL, AllURL string
}

// Suspects is the suspects page: tabs by state, filters by kind and source.
type Suspects struct {
	Page     Page
	Tabs     []Link
	Kinds    []Option
	State    string // the tab: open, confirmed, dismissed or all
	Kind     string
	Source   string
	Sources  []string
	Stats    []SuspectKindStats
	Rows     []SuspectRow
	NextURL  string
	FirstURL string // when not on the first page
	Empty    string
}

// SuspectRow is one suspect in the list.
type SuspectRow struct {
	ID                        int64
	Kind, Label, State        string
	Flagged, FlaggedTitle     string
	DeliveryID                int64
	DeliveryURL               string // "" once retention swept the delivery
	OtherID                   int64
	OtherURL                  string // "" when unknown or swept
	OtherSwept                bool   // OtherID is known, but retention swept it
	Source, OtherSource, Rule string
	Property, Booking, Amount string
	ReviewedBy, Reason        string
	// ReviewAction is the action of a review form in the row, "" for none: an open
	// suspect whose delivery was swept has no page of its own to be reviewed on.
	ReviewAction, Return string
}

// Ledger is the ledger page: money caught and at risk per day, source, property and
// currency.
type Ledger struct {
	Page    Page
	Filter  LedgerFilter
	Sources []string
	Totals  []LedgerLine // one per currency
	Rows    []LedgerLine
	// More: there are more rows than shown; the CSV export has them all.
	More   bool
	CSVURL string
	Error  string
}

// LedgerFilter is the ledger's filter form, as typed.
type LedgerFilter struct {
	Source, Property, Currency string
	From, To                   string // dates, 2026-11-30
}

// LedgerLine is one row of the ledger (or a currency's totals: Day, Source and Property
// empty).
type LedgerLine struct {
	Day, Source, Property, Currency string
	Caught, MoneyMismatch           LedgerCell
	BusinessKey, Correlation        LedgerCell
	LateDuplicate, AtRisk           LedgerCell
	Confirmed                       LedgerCell
}

// LedgerCell is the deliveries of one kind in a ledger row: how many, their amounts
// summed in the row's currency, and the events list of them ("" for none).
type LedgerCell struct {
	Sum
	URL string
}

// Option is one choice of a select.
type Option struct{ Value, Label string }
