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

// TestConsole_KeysLateOutcomeOfFirstHandOff: a key's first hand-off outlives its
// lease, the next lease records it as interrupted, and then its outcome comes late and
// takes the interrupted row's place: the key still has no attempts counted, and the
// Keys page shows that outcome as its last attempt.
func TestConsole_KeysLateOutcomeOfFirstHandOff(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	d := &storage.Delivery{Source: "pms", Status: 200, Key: "late", KeyMethod: "event_id", PayloadHash: "l",
		ContentType: "application/json", Body: []byte(`{"event_id":"late"}`)}
	if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	lease := func() storage.Job {
		t.Helper()
		jobs, err := e.db.LeaseDue(ctx, e.clock.Now(), time.Minute, 10, nil)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("lease: %v, %v", jobs, err)
		}
		return jobs[0]
	}
	e.clock.Add(time.Second)
	first := lease()
	started := e.clock.Now()
	e.clock.Add(2 * time.Minute) // the first hand-off outlives its lease
	lease()                      // records it as interrupted; a second hand-off is in flight
	viewer := e.as(t, storage.RoleViewer)
	if _, p := viewer.page("/keys?source=pms&state=processing"); !strings.Contains(p.text(), "interrupted") {
		t.Fatalf("before the late outcome the page does not say interrupted: %q", p.text())
	}
	// The first hand-off's outcome comes late: the downstream answered 503.
	const why = "downstream answered 503"
	moved, err := e.db.FinishAttempt(ctx, first, storage.Attempt{Source: first.Source, Key: first.Key, Delivery: first.Delivery,
		StartedAt: started, Duration: 2 * time.Minute, Status: 503, Error: why}, storage.AttemptResult{NextAt: e.clock.Now().Add(time.Minute), LastError: why})
	if err != nil || moved {
		t.Fatalf("late finish: moved %v, %v", moved, err)
	}
	atts, err := e.db.Attempts(ctx, "pms", "late")
	if err != nil || len(atts) != 1 || atts[0].Status != 503 {
		t.Fatalf("attempts %+v, %v; want the late outcome in the interrupted row's place", atts, err)
	}
	_, p := viewer.page("/keys?source=pms&state=processing")
	if got := p.text(); !strings.Contains(got, "HTTP 503") {
		t.Errorf("the key's last hand-off (this claim's, its outcome known late) is not shown: %q", got)
	}
}

// TestConsole_KeysEarlierClaimsInterruptedHidden: a delivery received just before a
// key's lease ended (its claim's UpdatedAt) and claimed after the key was released, the
// release recording the cut-off hand-off at the lease's end: the new claim, handed to
// no one yet, does not show the earlier claim's interrupted hand-off as its own.
func TestConsole_KeysEarlierClaimsInterruptedHidden(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	rec := func(hash string, at time.Time) {
		t.Helper()
		d := &storage.Delivery{Source: "pms", Status: 200, Key: "race", KeyMethod: "event_id", PayloadHash: hash,
			ContentType: "application/json", Body: []byte(`{"event_id":"race"}`), ReceivedAt: at}
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
			t.Fatal(err)
		}
		if d.Outcome != storage.Accepted {
			t.Fatalf("delivery %s", d.Outcome)
		}
	}
	rec("a", time.Time{})
	jobs, err := e.db.LeaseDue(ctx, e.clock.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v, %v", jobs, err)
	}
	e.clock.Add(time.Minute - 50*time.Millisecond)
	received := e.clock.Now() // the new delivery is received (and queued) 50 ms before the lease ends
	e.clock.Add(100 * time.Millisecond)
	if _, err := e.db.ReleaseKey(ctx, storage.Release{Source: "pms", Key: "race", Actor: "sam", Reason: "stuck",
		StuckBefore: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	rec("b", received) // its claim commits after the release
	viewer := e.as(t, storage.RoleViewer)
	_, p := viewer.page("/keys?source=pms&state=processing")
	if got := p.text(); strings.Contains(got, "interrupted") {
		t.Errorf("the new claim, never handed off, shows the previous claim's interrupted hand-off: %q", got)
	}
}
