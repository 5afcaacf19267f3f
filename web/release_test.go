package web_test

import (
	"context"
	"net/url"
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
	jobs, err := e.db.LeaseDue(ctx, e.clock.Now(), time.Minute, 10)
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
