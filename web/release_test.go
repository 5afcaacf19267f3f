package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAPI_ReleaseRefusals: a refused release says why in the fixed words of its
// refusal, for one key and in bulk, never in the text of an internal error (which
// names times and delivery ids).
func TestAPI_ReleaseRefusals(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "busy", `{}`, true) // being handed downstream, not stuck yet
	e.record(t, "gone", `{}`, false)
	sweepPayloads(t, e.db) // gone's payload; busy's is owed and stays

	for _, tt := range []struct {
		body string
		code int
		want string
	}{
		{`{"source":"ota","key":"busy","reason":"r"}`, 409, "ota/busy: " + storage.RefusedBusy.Message()},
		{`{"source":"ota","key":"gone","reason":"r","reprocess":true}`, 409, "ota/gone: " + storage.RefusedPayloadGone.Message()},
		{`{"source":"ota","key":"nope","reason":"r"}`, 404, "ota/nope: " + storage.RefusedNotFound.Message()},
	} {
		code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", tt.body)
		if code != tt.code || out["error"] != tt.want {
			t.Errorf("%s: %d %q; want %d %q", tt.body, code, out["error"], tt.code, tt.want)
		}
	}

	for _, tt := range []struct{ body, want string }{
		{`{"source":"ota","state":"processing","reason":"r"}`, storage.RefusedBusy.Message()},
		{`{"source":"ota","state":"processed","reason":"r","reprocess":true}`, storage.RefusedPayloadGone.Message()},
	} {
		code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", tt.body)
		results, _ := out["results"].([]any)
		if code != 200 || out["matched"] != float64(1) || out["changed"] != float64(0) || len(results) != 1 ||
			results[0].(map[string]any)["error"] != tt.want {
			t.Errorf("bulk %s: %d %v; want one result with error %q", tt.body, code, out, tt.want)
		}
	}
}

// TestConsole_KeyWithAttemptUnderWay: a stuck key whose attempt is under way says so on
// the Keys page, and releasing or reprocessing it is refused, saying why, until the
// attempt is recorded.
func TestConsole_KeyWithAttemptUnderWay(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	d := &storage.Delivery{Source: "pms", Status: 200, Key: "slow", KeyMethod: "event_id", PayloadHash: "s",
		ContentType: "application/json", Body: []byte(`{"event_id":"slow"}`)}
	if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(15 * time.Minute) // stuck: processing longer than stuck_after
	jobs, err := e.db.LeaseDue(ctx, e.clock.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) != 1 || jobs[0].Key != "slow" {
		t.Fatalf("lease: %v, %v", jobs, err)
	}
	op := e.as(t, storage.RoleOperator)
	underWay := func() bool {
		t.Helper()
		_, p := op.page("/keys?source=pms")
		return p.testid("key-in-flight").len() == 1
	}
	if !underWay() {
		t.Fatal("the Keys page does not say that slow's attempt is under way")
	}
	for _, action := range []string{"release", "reprocess"} {
		_, _, h := op.post("/keys/release", url.Values{"action": {action}, "reason": {"downstream back"}, "k": {"pms/slow"}})
		_, p := op.page(h.Get("Location"))
		if want := "1 still being handed downstream (not stuck yet, or an attempt under way): left alone"; !strings.Contains(p.text(), want) {
			t.Errorf("%s of a key with an attempt under way: the page says %q; want %q", action, p.text(), want)
		}
	}
	if _, err := e.db.FinishAttempt(ctx, jobs[0], storage.Attempt{Source: "pms", Key: "slow", Delivery: d.ID, StartedAt: e.clock.Now(),
		Error: "connection refused"}, storage.AttemptResult{NextAt: e.clock.Now().Add(time.Hour), LastError: "connection refused"}); err != nil {
		t.Fatal(err)
	}
	if underWay() {
		t.Error("the Keys page says an attempt is under way after it was recorded")
	}
	op.post("/keys/release", url.Values{"action": {"reprocess"}, "reason": {"downstream back"}, "k": {"pms/slow"}})
	if c, err := e.db.Claim(ctx, "pms", "slow"); err != nil || c.Attempts != 0 || c.LastError != "" {
		t.Errorf("after a reprocess between attempts: %+v, %v; want queued again: no attempts, no error", c, err)
	}
}

// TestConsole_AttemptsNameTheirDelivery: a key claimed again after a release lists the
// attempts of its earlier claim too; each names the delivery whose payload it sent, on
// the delivery's page and in the API, so that the earlier claim's failures are not
// taken for the new event's.
func TestConsole_AttemptsNameTheirDelivery(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	send := func(body string) *storage.Delivery {
		t.Helper()
		d := &storage.Delivery{Source: "pms", Status: 200, Key: "again", KeyMethod: "event_id", PayloadHash: body,
			ContentType: "application/json", Body: []byte(`{"event_id":"again","n":"` + body + `"}`)}
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
			t.Fatal(err)
		}
		jobs, err := e.db.LeaseDue(ctx, e.clock.Now(), time.Minute, 10, nil)
		if err != nil || len(jobs) != 1 || jobs[0].Delivery != d.ID {
			t.Fatalf("lease: %v, %v; want delivery %d's job", jobs, err, d.ID)
		}
		if _, err := e.db.FinishAttempt(ctx, jobs[0], storage.Attempt{StartedAt: e.clock.Now(), Status: 500, Error: "HTTP 500 " + body},
			storage.AttemptResult{Failed: true, LastError: "HTTP 500"}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := send("one")
	if _, err := e.db.ReleaseKey(ctx, storage.Release{Source: "pms", Key: "again", Actor: "ann", Reason: "sent again by hand"}); err != nil {
		t.Fatal(err)
	}
	second := send("two")
	if second.Outcome != storage.Accepted {
		t.Fatalf("the key released: the next delivery was %s, want accepted", second.Outcome)
	}

	_, p := e.as(t, storage.RoleViewer).page(fmt.Sprintf("/events/%d", second.ID))
	sent := p.testid("attempt-delivery")
	if sent.len() != 2 {
		t.Fatalf("the second delivery's page lists %d attempts, want both of the key's", sent.len())
	}
	if got, want := sent.hrefs(), []string{fmt.Sprintf("/events/%d", first.ID)}; !slices.Equal(got, want) {
		t.Errorf("the attempts link to %v, want the earlier one to the first delivery %v", got, want)
	}
	if text := sent.text(); !strings.Contains(text, "this delivery") || !strings.Contains(text, fmt.Sprintf("delivery %d", first.ID)) {
		t.Errorf("the attempts' deliveries read %q, want delivery %d and this delivery", text, first.ID)
	}

	tok, _, err := e.db.CreateToken(ctx, storage.RoleViewer, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	code, body := e.clientAt(t, e.srv.URL, "Authorization", "Bearer "+tok).get("/api/v1/key?source=pms&key=again")
	var out struct {
		Attempts []struct{ Delivery string }
	}
	if err := json.Unmarshal([]byte(body), &out); code != 200 || err != nil || len(out.Attempts) != 2 {
		t.Fatalf("API key: %d, %v, %d attempts; want 200 and 2: %s", code, err, len(out.Attempts), body)
	}
	for i, want := range []int64{first.ID, second.ID} {
		if got := out.Attempts[i].Delivery; got != strconv.FormatInt(want, 10) {
			t.Errorf("API attempt %d names delivery %v, want %d", i, got, want)
		}
	}
}

// TestConsole_InterruptedAttempt: a hand-off whose outcome was never recorded (its
// process was killed mid-attempt) shows as interrupted with an unknown answer on the
// delivery's page, on the Keys page and in the API, not as the downstream failing.
func TestConsole_InterruptedAttempt(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	d := e.queue(t, "cut", "c", time.Time{})
	if _, err := e.db.FinishAttempt(ctx, e.leaseOne(t), storage.Attempt{StartedAt: e.clock.Now(), Status: 502, Error: "HTTP 502"},
		storage.AttemptResult{NextAt: e.clock.Now(), LastError: "HTTP 502"}); err != nil {
		t.Fatal(err)
	}
	e.leaseOne(t) // and its process is killed
	e.clock.Add(2 * time.Minute)
	e.leaseOne(t)

	viewer := e.as(t, storage.RoleViewer)
	_, p := viewer.page(fmt.Sprintf("/events/%d", d.ID))
	rows := p.testid("attempts").tag("tbody").tag("tr")
	row := func(i int) nodes { return nodes{t, rows.list[i : i+1]} }
	if rows.len() != 2 {
		t.Fatalf("the delivery's page lists %d attempts, want 2: %q", rows.len(), p.testid("attempts").text())
	}
	if got := row(1).text(); !strings.Contains(got, "unknown") || !strings.Contains(got, "(lease ended)") ||
		!strings.Contains(got, "interrupted: the lease ran out") || strings.Contains(got, "none") {
		t.Errorf("the interrupted attempt reads %q; want its answer unknown, its time the lease's end", got)
	}
	if got := row(0).text(); strings.Contains(got, "unknown") || !strings.Contains(got, "502") {
		t.Errorf("the recorded attempt reads %q", got)
	}
	_, p = viewer.page("/keys?source=pms&state=processing")
	if got := p.text(); !strings.Contains(got, "interrupted") {
		t.Errorf("the Keys page does not say the last attempt was interrupted: %q", got)
	}

	tok, _, err := e.db.CreateToken(ctx, storage.RoleViewer, "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	code, body := e.clientAt(t, e.srv.URL, "Authorization", "Bearer "+tok).get("/api/v1/key?source=pms&key=cut")
	var out struct {
		Attempts []struct {
			Status      int
			Interrupted bool
		}
	}
	if err := json.Unmarshal([]byte(body), &out); code != 200 || err != nil || len(out.Attempts) != 2 {
		t.Fatalf("API key: %d, %v; want 200 and 2 attempts: %s", code, err, body)
	}
	if a, b := out.Attempts[0], out.Attempts[1]; a.Interrupted || a.Status != 502 || !b.Interrupted || b.Status != 0 {
		t.Errorf("API attempts %+v; want the 502, then the interrupted one", out.Attempts)
	}
}
