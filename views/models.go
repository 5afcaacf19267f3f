package views

// Page is what every page's frame needs.
type Page struct {
	Title string
	Nav   string // the active menu item: dashboard, events, keys, bulk, suspects, ledger, lab, alerts, audit, users, sources, account
	User  string // "" on the login page
	Role  string
	// IsOperator and IsAdmin say what the user may do (admin implies operator).
	IsOperator, IsAdmin bool
	CSRF                string // the token every POST form carries
	CSS, JS, Icon       string // asset URLs
	Flash               []Flash
	// MustChangePassword: the user is to choose their own password before anything
	// else, so the frame offers no menu.
	MustChangePassword bool
}

// Flash is a one-time message shown on the next page.
type Flash struct {
	Kind string // ok, error, info
	Text string
}

// Login is the sign-in form.
type Login struct {
	Page     Page
	Username string
	Next     string // where to go after signing in
	Error    string
}

// Account is the signed-in user's own page: who they are, their password and their API
// tokens.
type Account struct {
	Page       Page
	Error      string // why the password was not changed
	Tokens     []TokenRow
	TokenName  string // the new token's name as typed
	TokenError string // why no token was made
	NewToken   string // a token just made: shown this once
}

// PasswordPage is the page where the signed-in user chooses a new password: the
// console sends them there first when someone else chose their present one.
type PasswordPage struct {
	Page  Page   // Page.MustChangePassword: someone else chose the present password
	Next  string // where to go once it is changed
	Error string // why the password was not changed
}

// TokenRow is one API token, without the token.
type TokenRow struct {
	ID                     int64
	Name, Created, Revoked string // Revoked is "" while the token is valid
}

// ErrorPage says what went wrong, in words for people.
type ErrorPage struct {
	Page    Page
	Code    int
	Title   string
	Message string
}

// Dashboard is the overview.
type Dashboard struct {
	Page    Page
	Range   string // 24h, 7d, 30d
	Ranges  []Link
	Totals  Totals
	Sources []SourceStats
	Caught  []EventRow // recent duplicates that carried an amount
	// Empty: no delivery at all in the range.
	Empty bool
	// ClockWarning, when set, says this machine's clock seems off the senders'.
	ClockWarning string
	// Suspects are the suspected doubles by kind, open ones and the money at stake.
	Suspects               []SuspectKindStats
	SuspectsURL, LedgerURL string
}

// Link is a labelled URL, Active when it is the current one.
type Link struct {
	Label, URL string
	Active     bool
}

// Totals are counts over every source in the dashboard's range.
type Totals struct {
	Accepted, Duplicate, Rejected, Mismatch int64
	DuplicateRate                           string     // "12.5 %"
	Money                                   []MoneySum // summed amounts of duplicates, per currency
	MoneyCount                              int64      // duplicates that carried an amount
	Stuck                                   int
	DuplicatesURL, MismatchURL, StuckURL    string
	RejectedURL, MoneyURL                   string
	// MoneyMismatch counts the mismatches in the amount, currency or status.
	MoneyMismatch    int64
	MoneyMismatchURL string
}

// SourceStats is one source's row and chart on the dashboard.
type SourceStats struct {
	Name                                    string
	Accepted, Duplicate, Rejected, Mismatch int64
	DuplicateRate                           string
	Money                                   []MoneySum
	MoneyCount                              int64
	Stuck                                   int
	EventsURL, DuplicatesURL, StuckURL      string
	Chart                                   Chart
}

// MoneySum is the amounts of one currency summed, written in it ("182.50"). Sums are
// never taken across currencies; Currency is "—" for amounts whose currency is not
// known.
type MoneySum struct {
	Currency string
	Sum
}

// Sum is deliveries or suspects counted, and their amounts summed in one currency
// ("182.50").
type Sum struct {
	Count  int64 // how many it counts; 0 where the sum does not say
	Amount string
	// Unsummed counts the amounts left out of Amount: no exact number of minor units.
	Unsummed int64
	// NoAmount counts those that carried no amount at all, adding nothing to Amount.
	NoAmount int64
}

// AmountUnknown says that every one the sum counts carried no amount: Amount is no sum
// of anything, and 0.00 would read as money known to be none.
func (s Sum) AmountUnknown() bool { return s.NoAmount > 0 && s.NoAmount == s.Count }

// EventRow is one delivery in a list.
type EventRow struct {
	ID          int64
	URL         string
	Time        string // local, short
	TimeTitle   string // full, with zone
	Source      string
	Outcome     string
	Mismatch    bool
	HTTPStatus  int
	EventStatus string
	// MoneyMismatch: a Mismatch in the amount, currency or status.
	MoneyMismatch bool
	// Flags are the suspects that name this delivery, flagged or as the other one.
	Flags       []FlagBadge
	Booking     string
	Property    string
	Amount      string
	Key         string
	KeyShort    string
	Error       string
	PayloadHash string
	This        bool   // on an event page: the delivery shown
	CompareURL  string // on an event page: compare this delivery with the one shown
	// Batch is the first item's delivery of the batched request this delivery is an
	// item of (0: a request of its own), BatchIndex its place there, from 0, and
	// BatchURL the first item's page.
	Batch      int64
	BatchIndex int
	BatchURL   string
}

// TimeBound is a filter's from or to. Input is its datetime-local box's value, a
// wall-clock time in the console's zone. Exact is the RFC 3339 time with its offset
// that the box stands for when the bound came as one (the ledger's and the dashboard's
// links give them), "" otherwise: a wall-clock time cannot tell apart the two instants
// of the hour that comes twice when summer time ends, so the form sends Exact back
// beside the box.
type TimeBound struct {
	Input, Exact string
}

// Param is the bound as a link gives it: the exact time when there is one.
func (b TimeBound) Param() string {
	if b.Exact != "" {
		return b.Exact
	}
	return b.Input
}

// DeliveryFilter is the events list's filter form, as typed.
type DeliveryFilter struct {
	Source, Outcome                string
	Mismatch                       bool
	MoneyMismatch                  bool   // mismatch=money: only mismatches that move money
	Currency                       string // of the amount
	Flag, FlagState                string // flagged by a suspect of this kind ("any"), in this state
	Property, Booking, Status, Key string
	From, To                       TimeBound
	Batch                          string // the items of one batched request
	// NoProperty and NoCurrency select the deliveries without one (property_none,
	// currency_none), as the ledger's rows of none link to them.
	NoProperty, NoCurrency bool
	// Amount is "any" to select only the deliveries that carry an amount, as the
	// ledger's money caught links to them; "" selects every delivery.
	Amount string
}

// Events is the events list.
type Events struct {
	Page     Page
	Filter   DeliveryFilter
	Filtered bool
	Sources  []string
	Rows     []EventRow
	NextURL  string
	FirstURL string // when not on the first page
	Partial  bool   // the page stopped at the scan window; NextURL searches older
	CSVURL   string
	Error    string // a filter that could not be read
	// NotStored is how many rejections the filter matches that were counted without
	// being stored individually (shown on the first page).
	NotStored int64
	// BulkURL opens a bulk action over the keys of the filter's events (operators);
	// BulkWhyNot says why there is none when the filter has no bulk equivalent.
	BulkURL, BulkWhyNot string
}

// Event is one delivery with everything known about it.
type Event struct {
	Page        Page
	Row         EventRow
	RemoteAddr  string
	ContentType string
	Derivation  Derivation
	Headers     []Header
	Body        string // pretty-printed when JSON
	BodyIsJSON  bool
	BodySize    int
	// BodyForm is the body as sent when it is a form whose payload field holds the
	// JSON that Body shows (GitHub's form content type); "" otherwise.
	BodyForm   string
	Key        *KeyState // nil when the delivery has no key (rejected)
	Deliveries []EventRow
	// MoreDeliveriesURL lists every delivery of the key when it has more than the first
	// FirstShown, which Deliveries holds (with this one) ("" when those are all).
	MoreDeliveriesURL string
	FirstShown        int
	Compare           *Compare
	Attempts          []AttemptRow
	ForwardURL        string // "" when the source records only
	// Batch places the delivery among the items of the request it came in; nil when
	// that request carried one event.
	Batch *Batch
	// Flags are the suspects that name this delivery, each with its review form when
	// CanReview and it is open.
	Flags     []FlagItem
	CanReview bool
	// BlockedBy is the delivery of another key that this duplicate repeats the business
	// key of (business_key_blocks), BlockedURL its page; 0 for any other delivery.
	BlockedBy  int64
	BlockedURL string
}

// Batch is a batched request as an item's page shows it: every item, each with its
// key.
type Batch struct {
	ID    int64 // the first item's delivery
	Index int   // the shown item's place, from 0
	Count int   // the items the request held, as far as those still stored tell
	// Stored is how many of them are still stored: fewer once retention deleted some.
	Stored int
	// HeadersURL is the first item's page, where the request's headers are kept ("" on
	// that page).
	HeadersURL string
	Items      []BatchItem
	// Envelope is what the request held besides its events, pretty-printed, read with
	// each item ("" for an item stored before envelopes were kept). EnvelopeSize is its
	// size as stored, and EnvelopeHeaderSize as the X-Hookdedup-Batch-Envelope header
	// carries it, escaped; EnvelopeOmitted says that is past the header's limit
	// (EnvelopeHeaderMax), so that each item goes downstream with its size instead.
	Envelope           string
	EnvelopeSize       int
	EnvelopeHeaderSize int
	EnvelopeHeaderMax  int
	EnvelopeOmitted    bool
	// EnvelopeShared: the envelope is stored once, with the first item (HeadersURL),
	// and read from there; false once retention has deleted that item.
	EnvelopeShared bool
	// Forwarded: the source hands its events downstream (it has a forward_url).
	Forwarded bool
}

// BatchItem is one item of a batched request.
type BatchItem struct {
	Index       int
	URL         string // the item's delivery page
	Outcome     string
	Mismatch    bool
	EventStatus string
	Key         string
	KeyShort    string
	KeyURL      string // every delivery of the item's key, in the events list
	This        bool   // the item shown
}

// Header is one request header.
type Header struct{ Name, Value string }

// Derivation says how a key was made, step by step.
type Derivation struct {
	Method      string // event_id or derived
	EventIDFrom string // "header:Webhook-Id" or "/event_id"
	EventIDHow  string // where the source looks for its event id (its config)
	KeyFields   []string
	Fields      []Field
	Canonical   string
	Hash        string
	HashOK      bool // the hash recomputed from Canonical is the key's
	Key         string
}

// Field is one key field's value as it entered the key.
type Field struct {
	Pointer string
	Value   string // canonical JSON, "null" when absent
	Present bool
}

// KeyState is a key's claim, with what an operator may do about it.
type KeyState struct {
	Source, Key string
	Value       string // "source/key", as the release form posts it
	State       string
	Stuck       bool
	Held        bool // a new delivery now would be a duplicate
	Since       string
	Expires     string
	Attempts    int
	LastError   string
	CanRelease  bool
	Return      string // where the release form comes back to
	Missing     bool   // no claim row: expired and swept
	// Blocked: no claim row because the delivery was blocked by its business key, and
	// a redelivery of its key meets that key again.
	Blocked bool
}

// Compare shows two deliveries of one key side by side, with a line diff.
type Compare struct {
	Left, Right Side
	Same        bool // identical after normalisation
	TooBig      bool
	Lines       []DiffLine
}

// Side is one delivery in a comparison.
type Side struct {
	ID    int64
	URL   string
	Label string
	Body  string
}

// DiffLine is one line of a diff: Op is "=", "-" (left only) or "+" (right only).
type DiffLine struct {
	Op      string
	Text    string
	LeftNo  int // 0 when absent on that side
	RightNo int
	// Money: a changed line of the amount, the currency or the status.
	Money bool
}

// AttemptRow is one dispatch attempt.
type AttemptRow struct {
	// Delivery is the delivery whose payload the attempt sent, and DeliveryURL its page
	// when it is not the one shown: a key claimed again after it expired or was
	// released lists the attempts of its earlier claims too, each sending its own.
	Delivery    int64
	DeliveryURL string
	Time        string
	Status      int
	OK          bool
	// Interrupted: its lease ran out before its outcome was recorded (Time is the
	// lease's end); the downstream may have received it.
	Interrupted bool
	Duration    string
	Error       string
	Response    string
}

// Keys lists claims by state.
type Keys struct {
	Page     Page
	Tabs     []Link
	Tab      string
	Source   string
	Sources  []string
	Rows     []KeyRow
	NextURL  string
	FirstURL string // when not on the first page
	PastLast bool   // a later stuck page with no keys left after the one before
	// BecameStuck counts, on a stuck listing's last page after the first, the keys
	// that became stuck since its first page: a pass keeps the first page's threshold.
	BecameStuck int
	Partial     bool // only a bounded stretch of keys was searched; NextURL searches on
	CanRelease  bool
	Return      string
	Empty       string // what to say when there are no rows
	// BulkURL opens a bulk action over every key of the listing (operators).
	BulkURL string
}

// KeyRow is one key in the list.
type KeyRow struct {
	Value       string // "source/key"
	Source, Key string
	KeyShort    string
	State       string
	Stuck       bool
	InFlight    bool // an attempt is under way: release and reprocess are refused until it ends
	Since       string
	SinceTitle  string
	Attempts    int
	LastStatus  string
	LastError   string
	EventURL    string
}

// Lab is the key lab: a payload in, its key out.
type Lab struct {
	Page    Page
	Sources []string
	Source  string
	Payload string
	Headers string
	// Error is why intake would refuse the payload whole before keying any event (a
	// form without its payload field, a body that holds no batch); "" when it would not.
	Error string
	// Batch is where a batched source's events are (its batch pointer); "" for a source
	// whose deliveries are one event each.
	Batch string
	// Refused is why intake would refuse a batch whole after taking it apart, as its
	// answer says it ("item 2: no idempotency key: …"), claiming none of its items; ""
	// when it would not.
	Refused string
	// Results are one per event intake keys in the payload: the delivery's one event, or
	// each item of a batch in order. None before the form is sent.
	Results []LabResult
}

// LabResult is what the lab found for one event.
type LabResult struct {
	Error       string
	Derivation  Derivation
	PayloadHash string
	Claim       string // a sentence about the key's claim
	ClaimState  string
	Held        bool
	// Blocked: the key is free, but business_key_blocks would make a delivery of the
	// payload a duplicate of the delivery whose business key it repeats.
	Blocked   bool
	EventsURL string
	// Flags are what a delivery of the payload would be flagged as, were it accepted
	// now; Foreseen says that was looked up.
	Flags    []LabFlag
	Foreseen bool
}

// LabFlag is one flag the lab foresees: its kind's name, a sentence, and the delivery
// it would be linked to ("" when unknown).
type LabFlag struct {
	Kind, Text, URL string
}

// Audit is the audit log.
type Audit struct {
	Page     Page
	Chain    AuditChain
	Rows     []AuditRow
	NextURL  string
	FirstURL string // when not on the first page
}

// AuditChain is the state of the audit log's hash chain, as far as it was checked.
type AuditChain struct {
	// State is "intact" (every row chains), "partial" (intact so far; the rows after
	// UpTo are not checked yet), "broken" or "empty".
	State string
	// Rows is how many rows chain, from the first up to row UpTo, whose hash is LastHash.
	Rows     int64
	UpTo     int64
	LastHash string
	// BrokenAt, Kind and Detail say where and how the chain breaks (State "broken").
	BrokenAt     int64
	Kind, Detail string
}

// AuditRow is one audit entry.
type AuditRow struct {
	Time, TimeTitle       string
	Actor, Action         string
	Source, Key, KeyShort string
	Reason, Previous      string
	EventsURL             string
}

// Users is the user list and the form to add one.
type Users struct {
	Page  Page
	Rows  []UserRow
	Roles []string
	Form  UserForm
}

// UserRow is one user.
type UserRow struct {
	Name, Role, Created string
	You                 bool
	// MustChangePassword: the user has not yet chosen their own password.
	MustChangePassword bool
	// Tokens is how many valid API tokens the user has: a new password or ended
	// sessions leave them working, so an admin revokes them apart.
	Tokens int
}

// UserForm is the add-user form as typed.
type UserForm struct {
	Name, Role, Error string
}

// Sources lists the configured sources.
type Sources struct {
	Page Page
	Rows []SourceRow
}

// SourceRow is one source.
type SourceRow struct {
	Name, Path, Scheme     string
	Timestamped, Integrity bool
	EventID                string
	KeyFields              []string
	TTL                    string
	ForwardURL             string
	MaxAttempts            int
	AmountField            string
	Labels                 []Header // business fields read for the console: name and pointer
	Secrets                []SecretRow
	EventsURL              string
	// Provider is the preset the settings start from ("" for none), ProviderTitle the
	// sender's name, ProviderNote what the preset keys on and leaves open.
	Provider, ProviderTitle, ProviderNote string
	Settings                              []SettingRow // effective settings, secrets left out
}

// SettingRow is one effective setting of a source, written as in the config file.
type SettingRow struct {
	Name, Value string
	FromPreset  bool // supplied by the provider's preset
	Default     bool // set by neither the source's table nor its preset
}

// SecretRow is one secret, masked unless an admin asked to reveal it.
type SecretRow struct {
	Masked     string
	Origin     string // where it comes from: generated, config file, environment variable
	Revealable bool
	Revealed   string // only in the answer to an admin's reveal request
	RevealURL  string
}
