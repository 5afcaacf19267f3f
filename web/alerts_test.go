package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/web"
)

// openAlert opens an alert of rule on subject, as the alert engine does.
func openAlert(t *testing.T, db *sqlite.DB, rule, subject string) storage.Alert {
	t.Helper()
	a, opened, err := db.OpenAlert(context.Background(), storage.Alert{Rule: rule, Kind: "downstream_failing", Subject: subject,
		Summary: "The last 3 attempts to hand " + subject + "'s events downstream failed.", Value: "3", Channels: []string{"ops"}}, db.Now())
	if err != nil || !opened {
		t.Fatalf("open alert: %v %v", opened, err)
	}
	return a
}

func alertsConfig(c *web.Config) {
	c.AlertRules = []web.AlertRule{{Name: "downstream", Kind: "downstream_failing", Description: "the last 3 attempts failed", Channels: []string{"ops"}}}
	c.AlertChannels = []web.AlertChannel{{Name: "ops", Type: "slack", Target: "https://hooks.example/…"}}
}

// TestConsole_Alerts: viewers see alerts, rules and channels; operators acknowledge and
// resolve with the session's CSRF token; who did what is shown and audited.
func TestConsole_Alerts(t *testing.T) {
	e := newConsoleEnv(t, alertsConfig)
	a := openAlert(t, e.db, "downstream", "pms")
	path := "/alerts/" + idStr(a.ID)

	viewer := e.as(t, storage.RoleViewer)
	code, body := viewer.get("/alerts")
	if code != http.StatusOK {
		t.Fatalf("GET /alerts as viewer: %d", code)
	}
	for _, want := range []string{`data-testid="alert-row"`, "downstream", "pms", "the last 3 attempts failed", "https://hooks.example/…",
		`href="/alerts" aria-current="page"`} {
		if !strings.Contains(body, want) {
			t.Errorf("alerts page lacks %q", want)
		}
	}
	if strings.Contains(body, `data-testid="alert-acknowledge"`) {
		t.Error("a viewer is offered the acknowledge button")
	}
	if code, _, _ := viewer.post(path+"/acknowledge", url.Values{}); code != http.StatusForbidden {
		t.Fatalf("a viewer's acknowledgement: %d, want 403", code)
	}

	op := e.as(t, storage.RoleOperator)
	op.get("/alerts")
	// Without the CSRF token: refused, nothing changed.
	if code, _, _ := op.do(http.MethodPost, path+"/acknowledge", url.Values{"csrf": {"wrong"}}); code != http.StatusForbidden {
		t.Fatalf("acknowledgement without the CSRF token: %d, want 403", code)
	}
	if got, _ := e.db.GetAlert(context.Background(), a.ID); got.State != storage.AlertOpen {
		t.Fatalf("state %s after a refused acknowledgement", got.State)
	}
	code, _, h := op.post(path+"/acknowledge", url.Values{"return": {"/alerts?state=all"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/alerts?state=all" {
		t.Fatalf("acknowledge: %d %s", code, h.Get("Location"))
	}
	_, body = op.get("/alerts?state=all")
	if !strings.Contains(body, "Acknowledged alert") || !strings.Contains(body, "Acknowledged by operator") {
		t.Errorf("acknowledgement not shown:\n%s", body)
	}
	if code, _, _ := op.post(path+"/resolve", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("resolve: %d", code)
	}
	_, body = op.get("/alerts?state=resolved")
	if !strings.Contains(body, "Resolved by operator") || !strings.Contains(body, `data-state="resolved"`) {
		t.Errorf("resolution not shown:\n%s", body)
	}
	// Again: already resolved, nothing changes.
	op.post(path+"/resolve", url.Values{})
	_, body = op.get("/alerts")
	if !strings.Contains(body, "already resolved: nothing changed") {
		t.Errorf("second resolution not refused:\n%s", body)
	}
	audit, err := e.db.AuditLog(context.Background(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) < 2 || audit[0].Action != "resolve alert" || audit[1].Action != "acknowledge alert" || audit[0].Actor != "operator" {
		t.Errorf("audit = %+v", audit[:min(2, len(audit))])
	}
	if code, _ := op.get("/alerts?state=bogus"); code != http.StatusBadRequest {
		t.Errorf("unknown state: %d", code)
	}
	if code, _, _ := op.post("/alerts/999/resolve", url.Values{}); code != http.StatusNotFound {
		t.Errorf("unknown alert: %d", code)
	}
}

// TestAPI_Alerts: list, acknowledge and resolve through the JSON API, operators only.
func TestAPI_Alerts(t *testing.T) {
	e := newAPIEnv(t)
	a := openAlert(t, e.db, "downstream", "ota")
	id := idStr(a.ID)
	code, out := e.call(t, storage.RoleViewer, http.MethodGet, "/api/v1/alerts", "")
	list, _ := out["alerts"].([]any)
	if code != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["state"] != "open" || list[0].(map[string]any)["subject"] != "ota" {
		t.Fatalf("list: %d %v", code, out)
	}
	if code, out := e.call(t, storage.RoleViewer, http.MethodPost, "/api/v1/alerts/"+id+"/acknowledge", ""); code != http.StatusForbidden {
		t.Fatalf("viewer acknowledges: %d %v", code, out)
	}
	code, out = e.call(t, storage.RoleOperator, http.MethodPost, "/api/v1/alerts/"+id+"/acknowledge", "")
	if code != http.StatusOK || out["state"] != "acknowledged" || out["acknowledged_by"] != "operator-user" {
		t.Fatalf("acknowledge: %d %v", code, out)
	}
	if code, out := e.call(t, storage.RoleOperator, http.MethodPost, "/api/v1/alerts/"+id+"/acknowledge", ""); code != http.StatusConflict {
		t.Fatalf("second acknowledgement: %d %v", code, out)
	}
	code, out = e.call(t, storage.RoleOperator, http.MethodPost, "/api/v1/alerts/"+id+"/resolve", "")
	if code != http.StatusOK || out["state"] != "resolved" || out["resolved_by"] != "operator-user" {
		t.Fatalf("resolve: %d %v", code, out)
	}
	if code, _ := e.call(t, storage.RoleOperator, http.MethodPost, "/api/v1/alerts/12345/resolve", ""); code != http.StatusNotFound {
		t.Fatalf("unknown alert: %d", code)
	}
	code, out = e.call(t, storage.RoleViewer, http.MethodGet, "/api/v1/alerts?state=resolved", "")
	if list, _ := out["alerts"].([]any); code != http.StatusOK || len(list) != 1 {
		t.Fatalf("resolved list: %d %v", code, out)
	}
	if code, _ := e.call(t, storage.RoleViewer, http.MethodGet, "/api/v1/alerts?state=nope", ""); code != http.StatusBadRequest {
		t.Fatalf("bad state: %d", code)
	}
}

// TestAPI_AlertActionBody: acknowledging or resolving takes no fields, so a body that
// names one (a reason the caller believes is recorded), or is no JSON object, is refused
// with 400 and the alert is left as it was, as every endpoint refuses a body it does not
// take; no body at all, or an empty object, acts.
func TestAPI_AlertActionBody(t *testing.T) {
	e := newAPIEnv(t)
	a := openAlert(t, e.db, "downstream", "ota")
	id := idStr(a.ID)
	for _, action := range []string{"acknowledge", "resolve"} {
		for _, body := range []string{`{"reason":"PMS restored"}`, `not json`, `{}{}`, `[]`} {
			code, out := e.call(t, storage.RoleOperator, http.MethodPost, "/api/v1/alerts/"+id+"/"+action, body)
			if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), "body") {
				t.Errorf("%s with body %q: %d %v; want 400 naming the body", action, body, code, out)
			}
		}
		if got, err := e.db.GetAlert(context.Background(), a.ID); err != nil || got.State != storage.AlertOpen {
			t.Fatalf("after bodies refused: %+v %v; want the alert open still", got, err)
		}
	}
	if code, out := e.call(t, storage.RoleOperator, http.MethodPost, "/api/v1/alerts/"+id+"/acknowledge", "{}"); code != http.StatusOK {
		t.Fatalf("acknowledge with {}: %d %v", code, out)
	}
	if code, out := e.call(t, storage.RoleOperator, http.MethodPost, "/api/v1/alerts/"+id+"/resolve", ""); code != http.StatusOK {
		t.Fatalf("resolve without a body: %d %v", code, out)
	}
}
