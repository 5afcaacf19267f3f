package storage

import (
	"errors"
	"slices"
	"time"
)

// Alert states: open → acknowledged → resolved, or open → resolved.
const (
	AlertOpen         = "open"
	AlertAcknowledged = "acknowledged"
	AlertResolved     = "resolved"
)

// Alert events, the transitions a notification tells of.
const (
	AlertOpened        = "opened"
	AlertResolvedEvent = "resolved"
)

// ResolvedRuleRemoved is the resolver (Alert.ResolvedBy, Notification.Actor) of an
// alert the engine resolved because its rule is no longer configured: it has no
// condition left to clear. It cannot be a user's name (those start with a letter or a
// digit).
const ResolvedRuleRemoved = "(rule removed)"

// ErrAlertState means an alert is not in a state that allows the change asked for
// (acknowledging a resolved alert, resolving one twice).
var ErrAlertState = errors.New("alert is not in a state that allows this")

// ErrAlertHeld means an alert was not resolved by itself (ClearAlert): an evaluation,
// maybe another replica's, found its condition holding within the clear period.
var ErrAlertHeld = errors.New("alert's condition held within its clear period")

// ErrLeaseLost means a notification's outcome was not recorded: its lease had run out
// and another sender leased it since, whose outcome counts, or it was deleted since.
var ErrLeaseLost = errors.New("the lease ran out and another sender holds it now")

// Alert is one alert: a rule's condition on one subject, from when it opened until it
// was resolved.
type Alert struct {
	ID      int64
	Rule    string // the rule's name
	Kind    string // the rule's kind
	Subject string // the source it is about; "" for the whole server
	State   string // AlertOpen, AlertAcknowledged or AlertResolved
	Summary string // in words, as last evaluated
	Value   string // the measured value, as last evaluated
	// Channels are the names of the channels its transitions are sent to.
	Channels            []string
	OpenedAt, UpdatedAt time.Time
	// HeldAt is when an evaluation, of any replica, last found its condition holding
	// (HoldAlert); OpenedAt at first. Replicas evaluate at their own moments, and a
	// condition that flaps may hold at one's and be clear at another's: it resolves by
	// itself only once clear for its rule's clear period since this (ClearAlert).
	HeldAt         time.Time
	AcknowledgedBy string
	AcknowledgedAt time.Time
	ResolvedBy     string // the user; "" when it resolved by itself; or ResolvedRuleRemoved
	ResolvedAt     time.Time
	// How its notifications fared (filled by Alerts only): the last error a channel
	// gave, and how many are waiting (retrying), given up on, and sent.
	LastNotificationError                     string
	PendingNotifications, FailedNotifications int
	SentNotifications                         int
	// OpenedTold, given to OpenAlert, names the channels already told of the opening
	// straight away (the alert could not be stored then): no opened notification is
	// queued for them, or they would be told twice. The others of Channels (a send cut
	// by a stop, or given up) get theirs through the outbox (UntoldOfOpening).
	OpenedTold []string
}

// UntoldOfOpening returns the channels of a that OpenAlert queues an opened
// notification for: those not told of the opening already (OpenedTold), in order.
func (a Alert) UntoldOfOpening() []string {
	var out []string
	for _, c := range a.Channels {
		if !slices.Contains(a.OpenedTold, c) {
			out = append(out, c)
		}
	}
	return out
}

// ClockSetBackSlack is how far after the time it is read at a hold (Alert.HeldAt) may be
// and still count: replicas read one clock, the database server's, and differ by
// moments. One further ahead was recorded before the clock was set back (a step of
// NTP, a machine resumed): counted, it would keep the alert from resolving until the
// clock caught up with it, an hour for a clock set back an hour.
const ClockSetBackSlack = time.Minute

// HeldWithin reports whether an evaluation found a's condition holding within d before
// now: its last hold (HeldAt) is less than d before now, and not past now by more than
// ClockSetBackSlack.
func (a Alert) HeldWithin(d time.Duration, now time.Time) bool {
	return now.Sub(a.HeldAt) < d && a.HeldAt.Sub(now) <= ClockSetBackSlack
}

// Active reports whether the alert is open or acknowledged.
func (a Alert) Active() bool { return a.State == AlertOpen || a.State == AlertAcknowledged }

// AlertFilter selects alerts for Alerts.
type AlertFilter struct {
	// State: "" or "active" for open and acknowledged ones, or AlertOpen,
	// AlertAcknowledged, AlertResolved, or "all".
	State  string
	Before int64 // keyset cursor: alerts with a smaller id (0 = from the newest)
	Limit  int   // default 100
}

// Notification is one transition of an alert to be told to one channel.
type Notification struct {
	ID       int64
	Channel  string
	Event    string // AlertOpened or AlertResolvedEvent
	Summary  string // the alert's at the transition
	Value    string
	Actor    string // who resolved it by hand; "" for the engine; or ResolvedRuleRemoved
	At       time.Time
	Attempts int // attempts made before this one
	Alert    Alert
	// LeasedUntil is the end of the lease LeaseNotifications gave it: its outcome is
	// recorded (FinishNotification) only while no other sender leased it since.
	LeasedUntil time.Time
}

// NotificationResult says how an attempt to send a notification went, and what follows.
type NotificationResult struct {
	Sent   bool // the channel took it
	Failed bool // the last allowed attempt failed: given up
	// Returned hands the notification back, due again at NextAt, with no attempt
	// counted: its sender stopped mid-send.
	Returned bool
	NextAt   time.Time // otherwise: when to try again
	Error    string    // what went wrong; "" when sent
}
