package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestConsole_KeysFirstHandOffInterrupted: a key whose only hand-off so far was
// interrupted (its process killed on the first attempt) has no attempt counted
// (interrupted ones are not), and the Keys page still says its last hand-off was
// interrupted.
func TestConsole_KeysFirstHandOffInterrupted(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	d := &storage.Delivery{Source: "pms", Status: 200, Key: "cut", KeyMethod: "event_id", PayloadHash: "c",
		ContentType: "application/json", Body: []byte(`{"event_id":"cut"}`)}
	if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	lease := func() {
		t.Helper()
		jobs, err := e.db.LeaseDue(ctx, e.clock.Now(), time.Minute, 10, nil)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("lease: %v, %v", jobs, err)
		}
	}
	lease() // and its process is killed
	e.clock.Add(2 * time.Minute)
	lease() // records the interrupted hand-off; this one is in flight
	if atts, err := e.db.Attempts(ctx, "pms", "cut"); err != nil || len(atts) != 1 || atts[0].Error != storage.AttemptInterrupted {
		t.Fatalf("attempts %+v, %v; want the interrupted one", atts, err)
	}
	viewer := e.as(t, storage.RoleViewer)
	_, p := viewer.page("/keys?source=pms&state=processing")
	if got := p.text(); !strings.Contains(got, "interrupted") {
		t.Errorf("the Keys page does not say the last hand-off was interrupted: %q", got)
	}
}

// TestConsole_KeysReclaimedShowsNoEarlierClaimsAttempt: a key handed off early in its
// lease, released and claimed anew by a new delivery before that lease's end keeps the
// lease's end (a takeover does not reset it); the new claim, handed to no one yet, shows
// no last attempt, not the previous claim's.
func TestConsole_KeysReclaimedShowsNoEarlierClaimsAttempt(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	rec := func(hash string) {
		t.Helper()
		d := &storage.Delivery{Source: "pms", Status: 200, Key: "re", KeyMethod: "event_id", PayloadHash: hash,
			ContentType: "application/json", Body: []byte(`{"event_id":"re"}`)}
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
			t.Fatal(err)
		}
		if d.Outcome != storage.Accepted {
			t.Fatalf("delivery %s", d.Outcome)
		}
	}
	rec("a")
	jobs, err := e.db.LeaseDue(ctx, e.clock.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v, %v", jobs, err)
	}
	j := jobs[0]
	e.clock.Add(time.Second)
	if moved, err := e.db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery,
		StartedAt: e.clock.Now(), Status: 299}, storage.AttemptResult{Done: true}); err != nil || !moved {
		t.Fatalf("finish: %v %v", moved, err)
	}
	e.clock.Add(time.Second)
	if _, err := e.db.ReleaseKey(ctx, storage.Release{Source: "pms", Key: "re", Actor: "sam", Reason: "resend"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Second)
	rec("b") // a new event claims the key; nobody has handed it off yet
	viewer := e.as(t, storage.RoleViewer)
	_, p := viewer.page("/keys?source=pms&state=processing")
	got := p.text()
	if !strings.Contains(got, "re") {
		t.Fatalf("key not listed: %q", got)
	}
	if strings.Contains(got, "HTTP 299") {
		t.Errorf("the new claim, never handed off, shows the previous claim's last attempt: %q", got)
	}
}

// TestConsole_KeysReprocessedShowsNoEarlierAttempt: a reprocess clears a key's attempts
// and last error but keeps its claim; until it is handed off again the Keys page shows
// no last attempt, not the one from before the reprocess.
func TestConsole_KeysReprocessedShowsNoEarlierAttempt(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	d := &storage.Delivery{Source: "pms", Status: 200, Key: "rp", KeyMethod: "event_id", PayloadHash: "h",
		ContentType: "application/json", Body: []byte(`{"event_id":"rp"}`)}
	if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	jobs, err := e.db.LeaseDue(ctx, e.clock.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v, %v", jobs, err)
	}
	j := jobs[0]
	e.clock.Add(time.Second)
	const oldErr = "downstream answered 418 teapot-review"
	if moved, err := e.db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery,
		StartedAt: e.clock.Now(), Status: 418, Error: oldErr}, storage.AttemptResult{Failed: true, LastError: oldErr}); err != nil || !moved {
		t.Fatalf("finish: %v %v", moved, err)
	}
	e.clock.Add(2 * time.Minute)
	if _, err := e.db.ReleaseKey(ctx, storage.Release{Source: "pms", Key: "rp", Actor: "sam", Reason: "retry",
		Reprocess: true, StuckBefore: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	viewer := e.as(t, storage.RoleViewer)
	_, p := viewer.page("/keys?source=pms&state=processing")
	got := p.text()
	if !strings.Contains(got, "rp") {
		t.Fatalf("key not listed: %q", got)
	}
	if strings.Contains(got, "HTTP 418") || strings.Contains(got, "teapot-review") {
		t.Errorf("the reprocessed key (attempts and last error reset) shows the attempt from before the reprocess: %q", got)
	}
}
