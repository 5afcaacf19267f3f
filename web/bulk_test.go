package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
)

// refundKeys records stuck refund keys of ota: EUR 400.00, 250.50 and -20.25, JPY 9000,
// and one without an amount. By hand: 5 keys; EUR 3 keys, sum 630.25, moved 670.75;
// JPY 1 key, 9000.
func refundKeys(t *testing.T, e *consoleEnv) {
	t.Helper()
	for i, m := range [][2]string{{"400.00", "EUR"}, {"250.50", "EUR"}, {"-20.25", "EUR"}, {"9000", "JPY"}, {"", ""}} {
		d := &storage.Delivery{Source: "ota", Key: fmt.Sprintf("refund-%d", i), KeyMethod: "event_id", PayloadHash: fmt.Sprint(i),
			Property: "HTL-9", EventStatus: "refunded", Amount: m[0], Currency: m[1], ContentType: "application/json",
			Body: []byte(`{"refund":1}`)}
		storagetest.Record(t, e.db, d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	}
	e.clock.Add(time.Hour) // stuck now
}

func withThreshold(c *web.Config) {
	c.ApprovalThreshold = storage.ApprovalThresholds{"EUR": "500.00"}
}

// runBulk runs the bulk runner on e's database until the test ends.
func runBulk(t *testing.T, e *consoleEnv) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.db.RunBulkActions(ctx, storage.BulkRunConfig{Poll: 20 * time.Millisecond, Batch: 2})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func bulkState(t *testing.T, e *consoleEnv, id int64) storage.BulkAction {
	t.Helper()
	a, err := e.db.BulkAction(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestConsole_BulkFourEyes: an operator previews a reprocess of every stuck refund, with
// figures that match a hand count; its money is above the EUR threshold, so starting it
// makes it wait; the requester cannot approve it (console or API) and a viewer may not;
// a second operator approves it and each key is reprocessed with its audit row.
func TestConsole_BulkFourEyes(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	storagetest.CreateUser(t, e.db, "operator2", storage.RoleOperator, consolePassword)
	op := e.as(t, storage.RoleOperator)

	code, _, h := op.post("/bulk", url.Values{"kind": {"reprocess"}, "source": {"ota"}, "state": {"stuck"},
		"status": {"refunded"}, "reason": {"refund run failed at the PMS"}})
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/bulk/") {
		t.Fatalf("preview: %d %q", code, h.Get("Location"))
	}
	where := h.Get("Location")
	var id int64
	fmt.Sscanf(where, "/bulk/%d", &id)
	_, page := op.page(where)
	if got := page.testid("bulk-total").text(); got != "5" {
		t.Errorf("keys: %q; want 5", got)
	}
	money := map[string]string{}
	for _, row := range page.testid("bulk-money-row").list {
		n := nodes{t: t, list: []*html.Node{row}}
		money[attr(row, "data-currency")] = n.testid("bulk-sum").text() + " / " + n.testid("bulk-gross").text()
	}
	if want := map[string]string{"EUR": "630.25 / 670.75", "JPY": "9,000 / 9,000"}; fmt.Sprint(money) != fmt.Sprint(want) {
		t.Errorf("money %v; want %v", money, want)
	}
	page.has("bulk-needs-approval", "bulk-start", "bulk-sample")

	op.post(where+"/start", nil)
	if a := bulkState(t, e, id); a.State != storage.BulkPendingApproval {
		t.Fatalf("started: %s; want pending_approval", a.State)
	}
	_, page = op.page(where)
	page.has("bulk-own-pending")
	if page.testid("bulk-approve").len() != 0 {
		t.Error("the requester is offered Approve")
	}
	// Sent anyway: refused on the server.
	op.post(where+"/approve", url.Values{"reason": {"me myself"}})
	op.post(where+"/refuse", url.Values{"reason": {"me myself"}})
	if a := bulkState(t, e, id); a.State != storage.BulkPendingApproval || a.DecidedBy != "" {
		t.Fatalf("after the requester's approval: %+v", a)
	}
	_, page = op.page(where)
	if !strings.Contains(page.text(), "a second operator must approve") {
		t.Error("no word that the requester cannot approve")
	}
	viewer := e.as(t, storage.RoleViewer)
	viewer.get(where)
	if code, _, _ := viewer.post(where+"/approve", url.Values{"reason": {"ok"}}); code != http.StatusForbidden {
		t.Errorf("a viewer's approval: %d; want 403", code)
	}
	tok, _, err := e.db.CreateToken(context.Background(), storage.RoleOperator, "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := apiPost(t, e.srv.URL+"/api/v1/bulk/"+fmt.Sprint(id)+"/approve", tok, `{"reason":"via the API"}`); code != http.StatusForbidden ||
		!strings.Contains(body, "second operator") {
		t.Errorf("the requester's approval through the API: %d %s", code, body)
	}

	_, page = e.as(t, storage.RoleViewer).page("/bulk/pending")
	if page.testid("bulk-row").len() != 1 {
		t.Errorf("pending approvals list %d actions; want 1", page.testid("bulk-row").len())
	}
	second := e.client(t).login("operator2")
	_, page = second.page(where)
	page.has("bulk-approve", "bulk-refuse")
	if code, _, _ := second.do(http.MethodPost, where+"/approve", url.Values{"reason": {"no token"}}); code != http.StatusForbidden {
		t.Errorf("an approval without the form's CSRF token: %d; want 403", code)
	}
	second.post(where+"/approve", url.Values{"reason": {"checked with finance"}})
	if a := bulkState(t, e, id); a.State != storage.BulkQueued || a.DecidedBy != "operator2" {
		t.Fatalf("approved: %+v", a)
	}
	runBulk(t, e)
	storagetest.Eventually(t, 30*time.Second, func() error {
		if a := bulkState(t, e, id); a.State != storage.BulkDone {
			return fmt.Errorf("state %s, %d done", a.State, a.Done)
		}
		return nil
	})
	_, page = op.page(where)
	if page.testid("bulk-changed").text() != "5" || page.testid("bulk-state").text() != "done" {
		t.Errorf("done page: changed %q, state %q", page.testid("bulk-changed").text(), page.testid("bulk-state").text())
	}
	log, _ := e.db.AuditLog(context.Background(), 0, 100)
	keys := 0
	var steps []string
	for _, a := range log {
		switch a.Action {
		case "reprocess":
			keys++
			if a.Actor != "operator" || !strings.Contains(a.Reason, "approved by operator2") {
				t.Errorf("key audit row %+v", a)
			}
		case "bulk start", "bulk approve":
			steps = append(steps, a.Action+" by "+a.Actor)
		}
	}
	if keys != 5 || strings.Join(steps, ", ") != "bulk approve by operator2, bulk start by operator" {
		t.Errorf("%d key audit rows, steps %v", keys, steps)
	}
}

// TestConsole_BulkRefusedAndCancelled: a second operator's refusal ends an action, and a
// release (no approval needed) is queued at once and can be cancelled.
func TestConsole_BulkRefusedAndCancelled(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	op := e.as(t, storage.RoleOperator)
	_, _, h := op.post("/bulk", url.Values{"kind": {"reprocess"}, "state": {"stuck"}, "currency": {"EUR"}, "reason": {"again"}})
	where := h.Get("Location")
	op.post(where+"/start", nil)
	admin := e.as(t, storage.RoleAdmin)
	admin.get(where)
	admin.post(where+"/refuse", url.Values{"reason": {"not before the audit"}})
	_, page := op.page(where)
	if page.testid("bulk-state").text() != "refused" || !strings.Contains(page.testid("bulk-decided").text(), "not before the audit") {
		t.Errorf("refused page: %q %q", page.testid("bulk-state").text(), page.testid("bulk-decided").text())
	}

	_, _, h = op.post("/bulk", url.Values{"kind": {"release"}, "state": {"stuck"}, "amount_min": {"250.50"}, "reason": {"free them"}})
	where = h.Get("Location")
	_, page = op.page(where)
	// EUR 400.00 and 250.50, and JPY 9000: a range without a currency is on the amount alone.
	if page.testid("bulk-total").text() != "3" {
		t.Errorf("amount range: %q keys; want 3", page.testid("bulk-total").text())
	}
	op.post(where+"/start", nil)
	var id int64
	fmt.Sscanf(where, "/bulk/%d", &id)
	if a := bulkState(t, e, id); a.State != storage.BulkQueued {
		t.Fatalf("a release: %s; want queued without approval", a.State)
	}
	op.post(where+"/cancel", nil)
	if a := bulkState(t, e, id); a.State != storage.BulkCancelled || a.CancelledBy != "operator" {
		t.Errorf("cancelled: %+v", a)
	}

	code, body, _ := op.post("/bulk", url.Values{"kind": {"reprocess"}, "amount_min": {"ten"}, "reason": {"x"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "amount_min") {
		t.Errorf("a bad amount: %d", code)
	}
}

func apiPost(t *testing.T, u, tok, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPI_Bulk drives a bulk action through the API alone: the preview's figures, the
// start that waits for approval, the requester's approval refused, a second operator's
// accepted, the status, and a cancel of what is over refused.
func TestAPI_Bulk(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	ctx := context.Background()
	tokens := map[string]string{}
	for _, name := range []string{storage.RoleOperator, storage.RoleAdmin, storage.RoleViewer} {
		tok, _, err := e.db.CreateToken(ctx, name, "script", "test")
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tok
	}
	call := func(who, method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokens[who])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode, out
	}
	for _, tt := range []struct{ body, want string }{
		{`{"kind":"delete","reason":"x"}`, `kind "delete"`},
		{`{"kind":"reprocess"}`, "reason is required"},
		{`{"kind":"reprocess","reason":"x","filter":{"amount_max":"1.2.3"}}`, "amount_max"},
		{`{"kind":"reprocess","reason":"x","filter":{"colour":"red"}}`, "colour"},
		{`{"kind":"release","reason":"x","filter":{"source":"otaa"}}`, `source "otaa"`},
		{`{"kind":"release","reason":"x","filter":{"state":"stuck"}}`, `state "stuck"`},
		{`{"kind":"release","reason":"x","filter":{"from":"yesterday"}}`, "yesterday"},
		{`{"kind":"release","reason":"x","filter":{"flag":"maybe"}}`, `flag "maybe"`},
		{`{"kind":"release","reason":"x","filter":{"flag_state":"closed"}}`, `flag_state "closed"`},
		{`{"kind":"release","reason":"x","filter":{"key":7}}`, "filter.key"},
		{`{"kind":"release","reason":"x","filter":{"key":"  "}}`, "key"},
	} {
		if code, out := call("operator", "POST", "/api/v1/bulk", tt.body); code != 400 || !strings.Contains(fmt.Sprint(out["error"]), tt.want) {
			t.Errorf("%s: %d %v; want 400 naming %q", tt.body, code, out, tt.want)
		}
	}
	if code, _ := call("viewer", "POST", "/api/v1/bulk", `{"kind":"release","reason":"x"}`); code != 403 {
		t.Errorf("a viewer's preview: %d", code)
	}
	code, out := call("operator", "POST", "/api/v1/bulk", `{"kind":"reprocess","reason":"refunds","filter":{"source":"ota","stuck":true,"property":"HTL-9"}}`)
	if code != 201 || out["total"] != float64(5) || out["no_amount"] != float64(1) {
		t.Fatalf("preview: %d %v", code, out)
	}
	money, _ := json.Marshal(out["money"])
	if want := `[{"currency":"EUR","gross":"670.75","keys":3,"sum":"630.25"},{"currency":"JPY","gross":"9000","keys":1,"sum":"9000"}]`; string(money) != want {
		t.Errorf("money %s; want %s", money, want)
	}
	if s, _ := out["sample"].([]any); len(s) != 5 {
		t.Errorf("sample of %d keys", len(s))
	}
	id := out["id"].(string)
	if code, out := call("admin", "POST", "/api/v1/bulk/"+id+"/start", ""); code != 403 {
		t.Errorf("started by another: %d %v", code, out)
	}
	// A start records no reason, the preview's being the action's: one sent along would
	// be dropped without a word, so it is refused and the action left as it was.
	if code, out := call("operator", "POST", "/api/v1/bulk/"+id+"/start", `{"reason":"go ahead"}`); code != 400 ||
		!strings.Contains(fmt.Sprint(out["error"]), "reason") {
		t.Errorf("start with a reason: %d %v; want 400 naming reason", code, out)
	}
	if _, out := call("viewer", "GET", "/api/v1/bulk/"+id, ""); out["state"] != storage.BulkPreview {
		t.Errorf("after a start with a reason: %v; want it a preview still", out["state"])
	}
	if code, out := call("operator", "POST", "/api/v1/bulk/"+id+"/start", ""); code != 200 || out["state"] != storage.BulkPendingApproval {
		t.Fatalf("start: %d %v", code, out)
	}
	if code, out := call("operator", "POST", "/api/v1/bulk/"+id+"/approve", `{"reason":"mine"}`); code != 403 {
		t.Errorf("self-approval: %d %v", code, out)
	}
	if code, out := call("admin", "POST", "/api/v1/bulk/"+id+"/approve", `{}`); code != 400 {
		t.Errorf("approval without a reason: %d %v", code, out)
	}
	if code, out := call("viewer", "GET", "/api/v1/bulk/pending", ""); code != 200 || len(out["actions"].([]any)) != 1 {
		t.Errorf("pending: %d %v", code, out)
	}
	if code, out := call("admin", "POST", "/api/v1/bulk/"+id+"/approve", `{"reason":"finance agrees"}`); code != 200 || out["state"] != storage.BulkQueued {
		t.Fatalf("approve: %d %v", code, out)
	}
	runBulk(t, e)
	storagetest.Eventually(t, 30*time.Second, func() error {
		_, out := call("viewer", "GET", "/api/v1/bulk/"+id, "")
		if out["state"] != storage.BulkDone {
			return fmt.Errorf("%v, %v done", out["state"], out["done"])
		}
		return nil
	})
	_, out = call("viewer", "GET", "/api/v1/bulk/"+id, "")
	if out["changed"] != float64(5) || out["decided_by"] != "admin" {
		t.Errorf("status: %v", out)
	}
	// The API's own words: a script has no page to reload.
	if code, out := call("operator", "POST", "/api/v1/bulk/"+id+"/cancel", ""); code != 409 ||
		out["error"] != "the action's state does not allow this" {
		t.Errorf("cancel of a finished action: %d %v; want 409, the action's state does not allow this", code, out)
	}
}

// TestConsole_ReprocessAboveThresholdWaits: the keys page and the API's release also
// reprocess keys, so a reprocess there whose money is above the threshold is refused,
// pointing to bulk actions, instead of going round the second operator. Below the
// threshold, and releases, act at once.
func TestConsole_ReprocessAboveThresholdWaits(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e) // refund-0 EUR 400.00, refund-1 EUR 250.50, refund-2 EUR -20.25: stuck
	ctx := context.Background()
	big := &storage.Delivery{Source: "ota", Key: "refund-big", KeyMethod: "event_id", PayloadHash: "big", Amount: "800.00",
		Currency: "EUR", ContentType: "application/json", Body: []byte(`{"refund":2}`)}
	storagetest.Record(t, e.db, big, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	e.clock.Add(time.Hour) // refund-big is stuck too
	updated := func(key string) time.Time {
		t.Helper()
		c, err := e.db.Claim(ctx, "ota", key)
		if err != nil {
			t.Fatal(err)
		}
		return c.UpdatedAt
	}
	keys := []string{"refund-0", "refund-1", "refund-2", "refund-big"}
	before := map[string]time.Time{}
	for _, key := range keys {
		before[key] = updated(key)
	}
	untouched := func(when string) {
		t.Helper()
		for _, key := range keys {
			if !updated(key).Equal(before[key]) {
				t.Errorf("%s: %s was acted on", when, key)
			}
		}
	}
	e.clock.Add(time.Minute) // a reprocess or release moves a key's updated_at to now

	op := e.as(t, storage.RoleOperator)
	_, _, h := op.post("/keys/release", url.Values{"action": {"reprocess"}, "reason": {"refunds again"},
		"k": {"ota/refund-0", "ota/refund-1"}})
	_, page := op.page(h.Get("Location"))
	if !strings.Contains(page.text(), "EUR 650.50 is above 500.00") || !strings.Contains(page.text(), "Bulk actions") {
		t.Errorf("ticked reprocess of EUR 650.50: the page says %q; want the money and Bulk actions", page.text())
	}
	untouched("ticked reprocess of EUR 650.50")
	tok, _, err := e.db.CreateToken(ctx, storage.RoleOperator, "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"source":"ota","stuck":true,"reason":"all of them","reprocess":true}`,
		`{"source":"ota","key":"refund-big","reason":"one","reprocess":true}`,
	} {
		if code, out := apiPost(t, e.srv.URL+"/api/v1/release", tok, body); code != http.StatusForbidden ||
			!strings.Contains(out, "bulk action") || !strings.Contains(out, "EUR") {
			t.Errorf("%s: %d %s; want 403 naming the money and bulk actions", body, code, out)
		}
		untouched(body)
	}
	if code, out := apiPost(t, e.srv.URL+"/api/v1/release", tok, `{"source":"ota","key":"refund-0","reason":"one","reprocess":true}`); code != http.StatusOK {
		t.Errorf("reprocess of EUR 400.00: %d %s; want 200", code, out)
	}
	op.post("/keys/release", url.Values{"action": {"release"}, "reason": {"free them"}, "k": {"ota/refund-1", "ota/refund-big"}})
	for _, key := range []string{"refund-0", "refund-1", "refund-big"} {
		if updated(key).Equal(before[key]) {
			t.Errorf("%s was not acted on: below the threshold, or a release", key)
		}
	}
}

// TestConsole_BulkJunkFilter: a filter the console cannot use is refused with words that
// name what is wrong, and makes no preview: a mistyped source would otherwise preview
// no keys, as if there were nothing to do.
func TestConsole_BulkJunkFilter(t *testing.T) {
	e := newConsoleEnv(t)
	refundKeys(t, e)
	op := e.as(t, storage.RoleOperator)
	for _, tt := range []struct {
		field, value, want string
	}{
		{"source", "otaa", `source "otaa"`},
		{"from", "yesterday", "From must be a date"},
		{"amount_min", "1e3", "amount_min"},
		{"state", "gone", `state "gone"`},
		{"flag", "maybe", `flag "maybe"`},
		{"flag_state", "closed", `flag_state "closed"`},
	} {
		form := url.Values{"kind": {"release"}, "reason": {"x"}, tt.field: {tt.value}}
		code, body, _ := op.post("/bulk", form)
		if code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(body), tt.want) {
			t.Errorf("%s=%q: %d; want 400 naming %q", tt.field, tt.value, code, tt.want)
		}
	}
	if acts, err := e.db.BulkActions(context.Background(), "", 0, 10); err != nil || len(acts) != 0 {
		t.Errorf("previews made of junk: %d, %v", len(acts), err)
	}
}

// TestConsole_BulkStalePreview: a day after its preview, an action offers neither Start
// nor Approve and says why; either sent anyway is refused on the server, in the console
// and the API, while Refuse still closes it.
func TestConsole_BulkStalePreview(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	op := e.as(t, storage.RoleOperator)
	preview := func() (string, int64) {
		t.Helper()
		_, _, h := op.post("/bulk", url.Values{"kind": {"reprocess"}, "state": {"stuck"}, "reason": {"refunds again"}})
		where := h.Get("Location")
		var id int64
		if _, err := fmt.Sscanf(where, "/bulk/%d", &id); err != nil {
			t.Fatalf("preview: redirected to %q", where)
		}
		return where, id
	}
	pending, pendingID := preview()
	op.post(pending+"/start", nil)
	if a := bulkState(t, e, pendingID); a.State != storage.BulkPendingApproval {
		t.Fatalf("started: %s; want pending_approval", a.State)
	}
	unstarted, unstartedID := preview()
	_, page := op.page(unstarted)
	page.has("bulk-start")
	if page.testid("bulk-stale").len() != 0 {
		t.Error("a fresh preview is said to be stale")
	}

	e.clock.Add(storage.MaxPreviewAge + time.Minute)
	op = e.as(t, storage.RoleOperator) // a day on, the session has ended
	_, page = op.page(unstarted)
	page.has("bulk-stale", "bulk-cancel")
	if page.testid("bulk-start").len() != 0 {
		t.Error("a stale preview offers Start")
	}
	op.post(unstarted+"/start", nil)
	if a := bulkState(t, e, unstartedID); a.State != storage.BulkPreview {
		t.Errorf("a stale preview started anyway: %s", a.State)
	}
	if _, page = op.page(unstarted); !strings.Contains(page.text(), "Make a new preview of the same filter") {
		t.Error("no word why the start was refused")
	}

	admin := e.as(t, storage.RoleAdmin)
	_, page = admin.page(pending)
	page.has("bulk-stale", "bulk-refuse")
	if page.testid("bulk-approve").len() != 0 {
		t.Error("a stale action offers Approve")
	}
	admin.post(pending+"/approve", url.Values{"reason": {"looks fine"}})
	if a := bulkState(t, e, pendingID); a.State != storage.BulkPendingApproval {
		t.Errorf("a stale action approved anyway: %s", a.State)
	}
	tok, _, err := e.db.CreateToken(context.Background(), storage.RoleAdmin, "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := apiPost(t, fmt.Sprintf("%s/api/v1/bulk/%d/approve", e.srv.URL, pendingID), tok, `{"reason":"ok"}`); code != http.StatusConflict ||
		!strings.Contains(body, "more than a day ago") {
		t.Errorf("API approval of a stale action: %d %s; want 409 naming its age", code, body)
	}
	admin.post(pending+"/refuse", url.Values{"reason": {"too old to trust"}})
	if a := bulkState(t, e, pendingID); a.State != storage.BulkRefused {
		t.Errorf("a stale action refused: %s; want refused", a.State)
	}
}

// The events page's link to act on its events' keys carries the filters that describe
// a key, the currency among them: a preview of more keys than the list showed would
// reprocess money the operator never looked at.
func TestConsole_BulkLinkFromEvents(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	op := e.as(t, storage.RoleOperator)
	_, page := op.page("/events?source=ota&currency=EUR&status=refunded")
	links := page.testid("bulk-all").attrs("href")
	if len(links) != 1 {
		t.Fatalf("bulk links on the events page: %v", links)
	}
	u, err := url.Parse(links[0])
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("currency") != "EUR" || q.Get("source") != "ota" || q.Get("status") != "refunded" {
		t.Errorf("bulk link %s; want the source, status and currency of the list", links[0])
	}
	q.Set("kind", "release")
	q.Set("reason", "refunds")
	_, _, h := op.post("/bulk", q)
	_, page = op.page(h.Get("Location"))
	if got := page.testid("bulk-total").text(); got != "3" {
		t.Errorf("preview from the EUR events: %s keys; want the 3 EUR keys", got)
	}
}

// TestConsole_FourEyesAddsUp: what an operator reprocessed without approval adds up
// against the threshold, so that a reprocess above it cannot be split into ticked keys
// or several bulk actions; the console says how much came before. Another operator's
// reprocess of the same money is under the threshold.
func TestConsole_FourEyesAddsUp(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	storagetest.CreateUser(t, e.db, "operator2", storage.RoleOperator, consolePassword)
	op := e.as(t, storage.RoleOperator)
	const over = "EUR 650.50 is above 500.00, 400.00 of it reprocessed in the last 24 hours"

	_, _, h := op.post("/keys/release", url.Values{"action": {"reprocess"}, "reason": {"refunds again"}, "k": {"ota/refund-0"}})
	if _, page := op.page(h.Get("Location")); strings.Contains(page.text(), "above") {
		t.Fatalf("ticked reprocess of EUR 400.00: the page says %q; want it done", page.text())
	}
	_, _, h = op.post("/keys/release", url.Values{"action": {"reprocess"}, "reason": {"refunds again"}, "k": {"ota/refund-1"}})
	if _, page := op.page(h.Get("Location")); !strings.Contains(page.text(), over) {
		t.Errorf("ticked reprocess of EUR 250.50 after 400.00: the page says %q; want %q", page.text(), over)
	}
	if c, err := e.db.Claim(context.Background(), "ota", "refund-1"); err != nil || c.State != storage.StateProcessing || c.Attempts != 0 ||
		!c.UpdatedAt.Before(e.clock.Now()) {
		t.Errorf("refund-1 after a refused reprocess: %+v, %v; want untouched", c, err)
	}

	preview := func(c *client) nodes {
		t.Helper()
		code, _, h := c.post("/bulk", url.Values{"kind": {"reprocess"}, "source": {"ota"}, "currency": {"EUR"},
			"amount_min": {"200"}, "amount_max": {"300"}, "reason": {"refund run failed at the PMS"}})
		if code != http.StatusSeeOther {
			t.Fatalf("preview: %d", code)
		}
		_, page := c.page(h.Get("Location"))
		if got := page.testid("bulk-total").text(); got != "1" {
			t.Errorf("keys: %q; want refund-1 alone", got)
		}
		return page
	}
	if got := preview(op).testid("bulk-needs-approval").text(); !strings.Contains(got, over) {
		t.Errorf("the same operator's bulk preview of EUR 250.50: %q; want %q", got, over)
	}
	if page := preview(e.client(t).login("operator2")); page.testid("bulk-needs-approval").len() != 0 {
		t.Errorf("another operator's bulk preview of EUR 250.50 needs approval: %q", page.testid("bulk-needs-approval").text())
	}
}

// bulkFromEventsPage follows the events page's bulk link for query, makes a release
// preview of it, and returns the preview's page.
func bulkFromEventsPage(t *testing.T, op *client, query string) nodes {
	t.Helper()
	_, page := op.page("/events?" + query)
	links := page.testid("bulk-all").attrs("href")
	if len(links) != 1 {
		t.Fatalf("bulk links on the events page of %s: %v", query, links)
	}
	u, err := url.Parse(links[0])
	if err != nil {
		t.Fatal(err)
	}
	_, form := op.page(links[0])
	form.has("bulk-form")
	q := u.Query()
	q.Set("kind", "release")
	q.Set("reason", "from the events")
	code, body, h := op.post("/bulk", q)
	if code != http.StatusSeeOther {
		t.Fatalf("preview of %v: %d %s", q, code, body)
	}
	_, page = op.page(h.Get("Location"))
	return page
}

// TestConsole_BulkLinkFromEventsKey: an events list filtered to one key leads to a
// preview of that key alone, saying so, not of every key of its source.
func TestConsole_BulkLinkFromEventsKey(t *testing.T) {
	e := newConsoleEnv(t)
	refundKeys(t, e)
	op := e.as(t, storage.RoleOperator)
	page := bulkFromEventsPage(t, op, "source=ota&key=refund-1")
	if got := page.testid("bulk-total").text(); got != "1" {
		t.Errorf("preview from the events of one key: %s keys; want 1", got)
	}
	if rows := page.testid("bulk-sample-row"); rows.len() != 1 || !strings.Contains(rows.text(), "refund-1") {
		t.Errorf("sample %q; want refund-1 alone", rows.text())
	}
	page.has("bulk-preview")
	if !strings.Contains(page.text(), "key: refund-1") {
		t.Errorf("the preview does not show its key filter: %s", page.text())
	}
}

// TestBulk_KeyOfNoSource: a preview of a key in no source, from the events page's bulk
// link or the API, searches the configured sources for it, as the events list does: a
// claim of the key in a source no longer configured is not among its keys.
func TestBulk_KeyOfNoSource(t *testing.T) {
	e := newConsoleEnv(t)
	refundKeys(t, e)
	storagetest.Record(t, e.db, &storage.Delivery{Source: "retired", Key: "refund-1", KeyMethod: "event_id", PayloadHash: "r",
		ContentType: "application/json", Body: []byte(`{"refund":1}`)}, storage.ClaimOptions{TTL: 24 * time.Hour})
	op := e.as(t, storage.RoleOperator)
	page := bulkFromEventsPage(t, op, "key=refund-1")
	if got := page.testid("bulk-total").text(); got != "1" {
		t.Errorf("preview from the events of a key in no source: %s keys; want 1, ota's", got)
	}
	if rows := page.testid("bulk-sample-row"); rows.len() != 1 || !strings.Contains(rows.text(), "ota") {
		t.Errorf("sample %q; want ota's refund-1 alone", rows.text())
	}
	tok, _, err := e.db.CreateToken(context.Background(), storage.RoleOperator, "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	code, body := apiPost(t, e.srv.URL+"/api/v1/bulk", tok, `{"kind":"release","reason":"x","filter":{"key":"refund-1"}}`)
	if code != http.StatusCreated || !strings.Contains(body, `"total": 1,`) {
		t.Errorf("API preview of a key in no source: %d %s; want ota's key alone", code, body)
	}
}

// TestConsole_BulkLinkFromEventsNarrowOnly: an events list filtered by what no bulk
// filter reads (a duplicate, a mismatch, a batch) offers no bulk link, and says why,
// rather than one to every key of its source; one filtered by a flag leads to the
// flagged keys only.
func TestConsole_BulkLinkFromEventsNarrowOnly(t *testing.T) {
	e := newConsoleEnv(t)
	refundKeys(t, e)
	dup := &storage.Delivery{Source: "ota", Key: "refund-0", KeyMethod: "event_id", PayloadHash: "0",
		Property: "HTL-9", EventStatus: "refunded", Amount: "400.00", Currency: "EUR", ContentType: "application/json",
		Body: []byte(`{"refund":1}`)}
	storagetest.Record(t, e.db, dup, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	if dup.Outcome != storage.Duplicate {
		t.Fatalf("second delivery of refund-0: %s; want a duplicate", dup.Outcome)
	}
	op := e.as(t, storage.RoleOperator)
	for _, query := range []string{"source=ota&outcome=duplicate", "source=ota&mismatch=1", "source=ota&mismatch=money",
		"source=ota&batch=41", "source=ota&outcome=rejected"} {
		_, page := op.page("/events?" + query)
		if links := page.testid("bulk-all").attrs("href"); len(links) != 0 {
			t.Errorf("%s: bulk link %v; want none", query, links)
		}
		if why := page.testid("bulk-why-not").text(); !strings.Contains(why, "first, accepted delivery") {
			t.Errorf("%s: no word why there is no bulk link (%q)", query, why)
		}
	}
	page := bulkFromEventsPage(t, op, "source=ota&outcome=accepted&status=refunded")
	if got := page.testid("bulk-total").text(); got != "5" {
		t.Errorf("preview from the accepted events: %s keys; want 5", got)
	}
	page = bulkFromEventsPage(t, op, "source=ota&flag=any")
	if got := page.testid("bulk-total").text(); got != "0" {
		t.Errorf("preview from the flagged events, none flagged: %s keys; want 0", got)
	}
	if !strings.Contains(page.text(), "first delivery flagged") {
		t.Errorf("the preview does not show its flag filter: %s", page.text())
	}
}

// TestConsole_BulkExpiredKeys: a release's preview says how many of its keys are past
// their ttl, whose traces and business keys it forgets.
func TestConsole_BulkExpiredKeys(t *testing.T) {
	e := newConsoleEnv(t)
	for _, k := range []string{"old-1", "old-2"} {
		storagetest.Record(t, e.db, &storage.Delivery{Source: "ota", Key: k, KeyMethod: "event_id", PayloadHash: k,
			Property: "HTL-OLD", ContentType: "application/json", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour})
	}
	e.clock.Add(2 * time.Hour)
	op := e.as(t, storage.RoleOperator)
	_, _, h := op.post("/bulk", url.Values{"kind": {"release"}, "property": {"HTL-OLD"}, "reason": {"resend"}})
	_, page := op.page(h.Get("Location"))
	if got := page.testid("bulk-total").text(); got != "2" {
		t.Errorf("preview: %s keys; want the 2 expired keys", got)
	}
	page.testid("bulk-expired").shows("2 of them expired")
}

// TestConsole_ReprocessOfASourceNotRun: the keys page does not reprocess a key of a
// source this server does not run (renamed or removed while its event was owed): no
// dispatcher here would send it. It says so, and the key stays as it was.
func TestConsole_ReprocessOfASourceNotRun(t *testing.T) {
	e := newConsoleEnv(t)
	gone := &storage.Delivery{Source: "gone", Key: "g1", KeyMethod: "event_id", PayloadHash: "h", Body: []byte(`{}`)}
	storagetest.Record(t, e.db, gone, storage.ClaimOptions{TTL: 24 * time.Hour})
	op := e.as(t, storage.RoleOperator)
	_, _, h := op.post("/keys/release", url.Values{"action": {"reprocess"}, "reason": {"again"}, "k": {"gone/g1"}})
	_, page := op.page(h.Get("Location"))
	if !strings.Contains(page.text(), `Source "gone" is not in this server's configuration`) {
		t.Errorf("reprocess of a key of a source not run: the page says %q; want why it was refused", page.text())
	}
	if c, err := e.db.Claim(context.Background(), "gone", "g1"); err != nil || c.State != storage.StateProcessed {
		t.Errorf("gone/g1 after a refused reprocess: %s, %v; want processed, as it was", c.State, err)
	}
}

// TestBulk_ConsoleBlankFilterRefused: the console's bulk form refuses a property,
// booking, status or key of blanks alone, as the API does: read as given, each would be
// a filter left out, and the action would cover every key of the source. No preview is
// made.
func TestBulk_ConsoleBlankFilterRefused(t *testing.T) {
	e := newConsoleEnv(t)
	refundKeys(t, e)
	c := e.as(t, storage.RoleOperator)
	for _, field := range []string{"property", "booking", "status", "key"} {
		code, body, h := c.post("/bulk", url.Values{"kind": {"release"}, "source": {"ota"}, field: {" \t "}, "reason": {"narrow"}})
		if code != http.StatusBadRequest || !strings.Contains(parsePage(t, body).text(), field+": blanks alone") {
			t.Errorf("bulk form with a %s of blanks: %d (Location %q), want 400 naming it", field, code, h.Get("Location"))
		}
	}
	acts, err := e.db.BulkActions(context.Background(), "", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		t.Errorf("a preview was made from a blank filter: action %d of %d keys, filter %+v", a.ID, a.Total, a.Filter)
	}
}

// TestBulk_ReprocessOfASourceNotRun: a key of a source the configuration no longer has
// is not reprocessed by a bulk action either, as the keys page and the API's release
// refuse it: a bulk reprocess that names no source leaves such keys out of its preview
// (through the console and the API), so that its run does not put one back to
// processing, where no dispatcher of this configuration would ever send it; one that
// names the source is refused by the console's form, as by the API.
func TestBulk_ReprocessOfASourceNotRun(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	gone := &storage.Delivery{Source: "gone", Key: "g1", KeyMethod: "event_id", PayloadHash: "h", Property: "HTL-GONE",
		ContentType: "application/json", Body: []byte(`{}`)}
	storagetest.Record(t, e.db, gone, storage.ClaimOptions{TTL: 24 * time.Hour})
	// The console's Bulk actions form.
	op := e.as(t, storage.RoleOperator)
	if code, _, _ := op.post("/bulk", url.Values{"kind": {"reprocess"}, "source": {"gone"}, "reason": {"again"}}); code != http.StatusBadRequest {
		t.Errorf("the console's bulk reprocess of source gone: %d, want 400", code)
	}
	if code, _, h := op.post("/bulk", url.Values{"kind": {"reprocess"}, "property": {"HTL-GONE"}, "reason": {"again"}}); code == http.StatusSeeOther {
		var cid int64
		if _, err := fmt.Sscanf(h.Get("Location"), "/bulk/%d", &cid); err != nil {
			t.Fatalf("console preview: Location %q", h.Get("Location"))
		}
		if a := bulkState(t, e, cid); a.Total != 0 {
			t.Errorf("the console's preview of a bulk reprocess counts %d key(s), among them gone/g1 of a source this server does not run; want it left out", a.Total)
		}
		if _, _, h := op.post(fmt.Sprintf("/bulk/%d/cancel", cid), nil); h.Get("Location") == "" {
			t.Fatalf("cancel the console's preview")
		}
	}
	tok, _, err := e.db.CreateToken(ctx, storage.RoleOperator, "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	code, body := apiPost(t, e.srv.URL+"/api/v1/bulk", tok, `{"kind":"reprocess","reason":"again","filter":{"property":"HTL-GONE"}}`)
	var out map[string]any
	_ = json.Unmarshal([]byte(body), &out)
	if code == http.StatusBadRequest {
		return // refused up front: fine
	}
	if code != http.StatusCreated {
		t.Fatalf("preview: %d %s", code, body)
	}
	if out["total"] != float64(0) {
		t.Errorf("the preview of a bulk reprocess counts %v key(s), among them gone/g1 of a source this server does not run; want it left out", out["total"])
	}
	id := out["id"].(string)
	if code, body := apiPost(t, e.srv.URL+"/api/v1/bulk/"+id+"/start", tok, ``); code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	runBulk(t, e)
	storagetest.Eventually(t, 30*time.Second, func() error {
		if a := bulkState(t, e, bulkID(t, id)); a.State != storage.BulkDone {
			return fmt.Errorf("bulk action %s: %s", id, a.State)
		}
		return nil
	})
	if c, err := e.db.Claim(ctx, "gone", "g1"); err != nil || c.State != storage.StateProcessed {
		t.Errorf("gone/g1 after a bulk reprocess: %s, %v; want processed, as it was (nothing here would send it)", c.State, err)
	}
}

func bulkID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestConsole_BulkSampleAmountsAsStored: the preview's sample writes a plain decimal with
// its places and thousands separators ("EUR 1,234.50"), and any other amount as stored:
// a comma decimal "1234,50" is not made into "1,234,,50".
func TestConsole_BulkSampleAmountsAsStored(t *testing.T) {
	e := newConsoleEnv(t)
	for i, amount := range []string{"1234,50", "12,50", "1234.5"} {
		d := &storage.Delivery{Source: "ota", Key: fmt.Sprintf("amount-%d", i), KeyMethod: "event_id", PayloadHash: amount,
			EventStatus: "refunded", Amount: amount, Currency: "EUR", ContentType: "application/json", Body: []byte(`{"refund":1}`)}
		storagetest.Record(t, e.db, d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	}
	e.clock.Add(time.Hour) // stuck
	op := e.as(t, storage.RoleOperator)
	code, _, h := op.post("/bulk", url.Values{"kind": {"release"}, "source": {"ota"}, "state": {"stuck"},
		"status": {"refunded"}, "reason": {"PMS restored"}})
	if code != http.StatusSeeOther {
		t.Fatalf("preview: %d", code)
	}
	_, page := op.page(h.Get("Location"))
	shown := map[string]bool{}
	for _, row := range page.testid("bulk-sample-row").list {
		cells := nodes{t: t, list: []*html.Node{row}}.tag("td")
		shown[strings.TrimSpace(nodes{t: t, list: cells.list[3:4]}.text())] = true
	}
	for _, want := range []string{"EUR 1234,50", "EUR 12,50", "EUR 1,234.50"} {
		if !shown[want] {
			t.Errorf("sample amounts %v: no %q", shown, want)
		}
	}
}

// TestConsole_BulkAmountWithoutSign: the form and the action's page say that the amount
// range bounds amounts without their sign, as it selects them: the refund of -20.25 is
// at least 20, so the range takes four keys of refundKeys, not three.
func TestConsole_BulkAmountWithoutSign(t *testing.T) {
	e := newConsoleEnv(t)
	refundKeys(t, e)
	op := e.as(t, storage.RoleOperator)
	_, form := op.page("/bulk")
	if hint := form.testid("bulk-amount-hint").text(); !strings.Contains(hint, "without its sign") {
		t.Errorf("form hint: %q; want it to say the range ignores the sign", hint)
	}
	_, _, h := op.post("/bulk", url.Values{"kind": {"release"}, "state": {"stuck"}, "amount_min": {"20"}, "reason": {"free them"}})
	code, body := op.get(h.Get("Location"))
	page := parsePage(t, body)
	if code != http.StatusOK || page.testid("bulk-total").text() != "4" {
		t.Errorf("amount from 20: %d, %q keys; want 4", code, page.testid("bulk-total").text())
	}
	if !strings.Contains(body, "amount, either sign, at least: 20") {
		t.Errorf("the action's filter does not say the range is without sign")
	}
	code, body, _ = op.post("/bulk", url.Values{"kind": {"release"}, "amount_max": {"-100"}, "reason": {"x"}})
	if code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(body), "without their sign") {
		t.Errorf("a signed bound: %d; want 400 saying amounts compare without their sign", code)
	}
}
