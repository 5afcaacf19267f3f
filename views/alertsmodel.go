package views

// Alerts is the alerts page: the alerts of one tab, what each rule watches and where
// the channels send.
type Alerts struct {
	Page     Page
	Tab      string // active, open, acknowledged, resolved or all
	Tabs     []Link
	Rows     []AlertRow
	NextURL  string
	FirstURL string // when not on the first page
	Empty    string // the empty state's title
	// CanAct: the user may acknowledge and resolve (operator).
	CanAct   bool
	Return   string // where the forms come back to
	Rules    []AlertRuleRow
	Channels []AlertChannelRow
}

// AlertRow is one alert.
type AlertRow struct {
	ID, Rule, Kind, Subject, State string
	Summary                        string
	Channels                       string
	Opened, OpenedTitle            string
	AcknowledgedBy                 string
	Acknowledged                   string
	AcknowledgedTitle              string
	ResolvedBy                     string // a user, or words saying it resolved by itself
	Resolved, ResolvedTitle        string
	// How its notifications fared.
	Pending, Failed, Sent int
	LastError             string
}

// AlertRuleRow is one configured rule.
type AlertRuleRow struct {
	Name, Kind, Description, Channels string
}

// AlertChannelRow is one configured channel, without its secret.
type AlertChannelRow struct {
	Name, Type, Target string
}
