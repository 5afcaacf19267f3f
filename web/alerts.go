package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// alertStore is what the alerts page and the API's alerts ask of storage.
type alertStore interface {
	// Alerts returns the alerts the filter selects, newest first.
	Alerts(ctx context.Context, f storage.AlertFilter) ([]storage.Alert, error)
	// GetAlert returns ErrNotFound for an unknown alert.
	GetAlert(ctx context.Context, id int64) (storage.Alert, error)
	// AcknowledgeAlert and ResolveAlert return ErrNotFound for an unknown alert and
	// ErrAlertState for one whose state does not allow the change; both are audited.
	AcknowledgeAlert(ctx context.Context, id int64, actor string, at time.Time) (storage.Alert, error)
	ResolveAlert(ctx context.Context, id int64, actor string, at time.Time) (storage.Alert, error)
}

// AlertRule is an [[alert]] rule as the alerts page shows it.
type AlertRule struct {
	Name, Kind  string
	Description string // when it fires, in words
	Channels    []string
}

// AlertChannel is an [[alert_channel]] as the alerts page shows it: never its secret.
type AlertChannel struct {
	Name, Type string
	Target     string // where it sends, masked
}

// alertTabs are the alerts page's listings.
var alertTabs = []struct{ name, label string }{
	{"active", "Active"},
	{storage.AlertOpen, "Open"},
	{storage.AlertAcknowledged, "Acknowledged"},
	{storage.AlertResolved, "Resolved"},
	{"all", "All"},
}

func (s *Server) handleAlerts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	tab := q.Get("state")
	if tab == "" {
		tab = "active"
	}
	if !validAlertState(tab) {
		return badRequest("Unknown state: choose active, open, acknowledged, resolved or all.")
	}
	const limit = 50
	// One more than listed tells whether there is an older page: a full page alone
	// would link, at the end, to an empty one.
	f := storage.AlertFilter{State: tab, Limit: limit + 1}
	var err error
	if f.Before, err = pageBefore(q); err != nil {
		return err
	}
	list, err := s.alerts.Alerts(r.Context(), f)
	if err != nil {
		return err
	}
	more := len(list) > limit
	list = list[:min(len(list), limit)]
	u, _ := UserFrom(r.Context())
	v := views.Alerts{Page: s.page(r, "Alerts", "alerts"), Tab: tab, CanAct: Allowed(u.Role, storage.RoleOperator),
		Return: r.URL.RequestURI()}
	for _, t := range alertTabs {
		v.Tabs = append(v.Tabs, views.Link{Label: t.label, URL: "/alerts?state=" + t.name, Active: t.name == tab})
	}
	for _, a := range list {
		row := views.AlertRow{
			ID: strconv.FormatInt(a.ID, 10), Rule: a.Rule, Kind: a.Kind, Subject: a.Subject, State: a.State,
			Summary: a.Summary, Channels: strings.Join(a.Channels, ", "),
			Opened: s.ago(a.OpenedAt), OpenedTitle: s.fullTime(a.OpenedAt),
			AcknowledgedBy: a.AcknowledgedBy, Pending: a.PendingNotifications, Failed: a.FailedNotifications,
			Sent: a.SentNotifications, LastError: a.LastNotificationError,
		}
		if !a.AcknowledgedAt.IsZero() {
			row.Acknowledged, row.AcknowledgedTitle = s.ago(a.AcknowledgedAt), s.fullTime(a.AcknowledgedAt)
		}
		if a.State == storage.AlertResolved {
			row.Resolved, row.ResolvedTitle = s.ago(a.ResolvedAt), s.fullTime(a.ResolvedAt)
			switch row.ResolvedBy = a.ResolvedBy; row.ResolvedBy {
			case "":
				row.ResolvedBy = "itself (condition cleared)"
			case storage.ResolvedRuleRemoved:
				row.ResolvedBy = "its rule's removal from the configuration"
			}
		}
		v.Rows = append(v.Rows, row)
	}
	pages := newPager("/alerts", url.Values{"state": {tab}})
	if more {
		v.NextURL = pages.before(list[len(list)-1].ID)
	}
	if f.Before != 0 {
		v.FirstURL = pages.newest()
	}
	for _, rule := range s.alertRules {
		v.Rules = append(v.Rules, views.AlertRuleRow{Name: rule.Name, Kind: rule.Kind, Description: rule.Description,
			Channels: strings.Join(rule.Channels, ", ")})
	}
	for _, c := range s.alertChannels {
		v.Channels = append(v.Channels, views.AlertChannelRow{Name: c.Name, Type: c.Type, Target: c.Target})
	}
	switch tab {
	case "active":
		v.Empty = "No active alerts"
	case "all":
		v.Empty = "No alerts yet"
	default:
		v.Empty = "No " + tab + " alerts"
	}
	return s.render(w, r, http.StatusOK, views.AlertsView(v))
}

func validAlertState(s string) bool {
	for _, t := range alertTabs {
		if t.name == s {
			return true
		}
	}
	return false
}

// handleAlertAction acknowledges or resolves ("acknowledge", "resolve") one alert,
// then goes back to the page the form was on.
func (s *Server) handleAlertAction(action string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return s.alertForm(w, r, action)
	}
}

func (s *Server) alertForm(w http.ResponseWriter, r *http.Request, action string) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return errNotFound
	}
	back := localPath(r.PostFormValue("return"), "/alerts")
	u, _ := UserFrom(r.Context())
	a, err := s.alertAction(r.Context(), id, action, u.Name)
	switch {
	case errors.Is(err, storage.ErrAlertState):
		flash(r, w, "error", "Alert "+r.PathValue("id")+" was already "+a.State+": nothing changed.")
	case err != nil:
		return err
	case action == "acknowledge":
		flash(r, w, "ok", "Acknowledged alert "+r.PathValue("id")+": "+a.Rule+".")
	default:
		flash(r, w, "ok", "Resolved alert "+r.PathValue("id")+": "+a.Rule+".")
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

// alertAction acknowledges or resolves alert id as actor, logged; on ErrAlertState the
// alert is returned as it is.
func (s *Server) alertAction(ctx context.Context, id int64, action, actor string) (storage.Alert, error) {
	var a storage.Alert
	var err error
	switch action {
	case "acknowledge":
		a, err = s.alerts.AcknowledgeAlert(ctx, id, actor, s.now())
	case "resolve":
		a, err = s.alerts.ResolveAlert(ctx, id, actor, s.now())
		if err == nil {
			s.alertsChanged()
		}
	default:
		return a, errNotFound
	}
	if errors.Is(err, storage.ErrAlertState) {
		cur, gerr := s.alerts.GetAlert(ctx, id)
		if gerr != nil {
			return a, gerr
		}
		return cur, err
	}
	if err == nil {
		s.log.Info("alert "+action+"d", logBy, actor, "alert", id, "rule", a.Rule)
	}
	return a, err
}

// apiAlert is an alert as the API shows it.
type apiAlert struct {
	ID             string     `json:"id"`
	Rule           string     `json:"rule"`
	Kind           string     `json:"kind"`
	Subject        string     `json:"subject,omitempty"`
	State          string     `json:"state"`
	Summary        string     `json:"summary"`
	Value          string     `json:"value"`
	Channels       []string   `json:"channels"`
	OpenedAt       time.Time  `json:"opened_at"`
	AcknowledgedBy string     `json:"acknowledged_by,omitempty"`
	AcknowledgedAt *time.Time `json:"acknowledged_at,omitempty"`
	ResolvedBy     string     `json:"resolved_by,omitempty"` // absent when it resolved by itself; "(rule removed)" when its rule was
	ResolvedAt     *time.Time `json:"resolved_at,omitempty"`
}

func toAPIAlert(a storage.Alert) apiAlert {
	out := apiAlert{ID: strconv.FormatInt(a.ID, 10), Rule: a.Rule, Kind: a.Kind, Subject: a.Subject, State: a.State,
		Summary: a.Summary, Value: a.Value, Channels: a.Channels, OpenedAt: a.OpenedAt,
		AcknowledgedBy: a.AcknowledgedBy, ResolvedBy: a.ResolvedBy}
	if out.Channels == nil {
		out.Channels = []string{}
	}
	if !a.AcknowledgedAt.IsZero() {
		at := a.AcknowledgedAt
		out.AcknowledgedAt = &at
	}
	if !a.ResolvedAt.IsZero() {
		at := a.ResolvedAt
		out.ResolvedAt = &at
	}
	return out
}

func (a *api) listAlerts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "active"
	}
	if !validAlertState(state) {
		return Errorf(http.StatusBadRequest, "state %q: want active, open, acknowledged, resolved or all", state)
	}
	before, err := apiID(q, "before")
	if err != nil {
		return err
	}
	limit, err := apiLimit(q, 50, 500)
	if err != nil {
		return err
	}
	f := storage.AlertFilter{State: state, Before: before, Limit: limit}
	list, err := a.alerts.Alerts(r.Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Alerts []apiAlert `json:"alerts"`
		Next   string     `json:"next,omitempty"` // pass as before= for the next page
	}{Alerts: []apiAlert{}}
	for _, al := range list {
		out.Alerts = append(out.Alerts, toAPIAlert(al))
	}
	if len(list) == f.Limit {
		out.Next = strconv.FormatInt(list[len(list)-1].ID, 10)
	}
	writeAPI(w, http.StatusOK, out)
	return nil
}

// alertAction answers POST /api/v1/alerts/{id}/acknowledge or /resolve.
func (a *api) alertAction(action string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return a.alertChange(w, r, action)
	}
}

func (a *api) alertChange(w http.ResponseWriter, r *http.Request, action string) error {
	id, err := apiPathID(r, "alert")
	if err != nil {
		return err
	}
	// It takes no field: a body that names one (a reason the caller would believe
	// recorded) is refused as any endpoint refuses a field it does not know.
	if err := decodeOptionalBody(w, r, &struct{}{}, `{} or nothing`); err != nil {
		return err
	}
	u, _ := UserFrom(r.Context())
	al, err := a.Server.alertAction(r.Context(), id, action, u.Name)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return noSuchID("alert", id)
	case errors.Is(err, storage.ErrAlertState):
		return Errorf(http.StatusConflict, "alert %d is %s: it cannot be %sd", id, al.State, action)
	case err != nil:
		return err
	}
	writeAPI(w, http.StatusOK, toAPIAlert(al))
	return nil
}
