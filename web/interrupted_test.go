package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// queue records a delivery of pms/key with payload hash hash, received at at (the zero
// time: the clock's now), to hand downstream, and fails the test unless it is accepted.
func (e *consoleEnv) queue(t *testing.T, key, hash string, at time.Time) *storage.Delivery {
	t.Helper()
	d := &storage.Delivery{Source: "pms", Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: hash,
		ContentType: "application/json", Body: []byte(`{"event_id":"` + key + `"}`), ReceivedAt: at}
	if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	if d.Outcome != storage.Accepted {
		t.Fatalf("delivery of %s: %s, want accepted", key, d.Outcome)
	}
	return d
}

// leaseOne leases the one job due at the clock's now, for a minute.
func (e *consoleEnv) leaseOne(t *testing.T) storage.Job {
	t.Helper()
	jobs, err := e.db.LeaseDue(context.Background(), e.clock.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v, %v; want one job", jobs, err)
	}
	return jobs[0]
}

// finish records j's hand-off, started at started, as answered status with the error
// why ("" for none) and the outcome res, and reports whether it moved the key.
func (e *consoleEnv) finish(t *testing.T, j storage.Job, started time.Time, status int, why string, res storage.AttemptResult) bool {
	t.Helper()
	moved, err := e.db.FinishAttempt(context.Background(), j, storage.Attempt{Source: j.Source, Key: j.Key,
		Delivery: j.Delivery, StartedAt: started, Duration: e.clock.Now().Sub(started), Status: status, Error: why}, res)
	if err != nil {
		t.Fatalf("finish %s/%s: %v", j.Source, j.Key, err)
	}
	return moved
}

// processingKeys is the text of the Keys page of pms's processing keys, as a viewer
// reads it.
func (e *consoleEnv) processingKeys(t *testing.T) string {
	t.Helper()
	_, p := e.as(t, storage.RoleViewer).page("/keys?source=pms&state=processing")
	return p.text()
}

// TestConsole_KeysFirstHandOffInterrupted: a key whose only hand-off so far was
// interrupted (its process killed on the first attempt) has no attempt counted
// (interrupted ones are not), and the Keys page still says its last hand-off was
// interrupted.
func TestConsole_KeysFirstHandOffInterrupted(t *testing.T) {
	e := newConsoleEnv(t)
	e.queue(t, "cut", "c", time.Time{})
	e.leaseOne(t) // and its process is killed
	e.clock.Add(2 * time.Minute)
	e.leaseOne(t) // records the interrupted hand-off; this one is in flight
	if atts, err := e.db.Attempts(context.Background(), "pms", "cut"); err != nil || len(atts) != 1 || atts[0].Error != storage.AttemptInterrupted {
		t.Fatalf("attempts %+v, %v; want the interrupted one", atts, err)
	}
	if got := e.processingKeys(t); !strings.Contains(got, "interrupted") {
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
	e.queue(t, "re", "a", time.Time{})
	j := e.leaseOne(t)
	e.clock.Add(time.Second)
	if !e.finish(t, j, e.clock.Now(), 299, "", storage.AttemptResult{Done: true}) {
		t.Fatal("the hand-off did not move the key")
	}
	e.clock.Add(time.Second)
	if _, err := e.db.ReleaseKey(ctx, storage.Release{Source: "pms", Key: "re", Actor: "sam", Reason: "resend"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Second)
	e.queue(t, "re", "b", time.Time{}) // a new event claims the key; nobody has handed it off yet
	got := e.processingKeys(t)
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
	e.queue(t, "rp", "h", time.Time{})
	j := e.leaseOne(t)
	e.clock.Add(time.Second)
	const oldErr = "downstream answered 418 teapot-review"
	if !e.finish(t, j, e.clock.Now(), 418, oldErr, storage.AttemptResult{Failed: true, LastError: oldErr}) {
		t.Fatal("the hand-off did not move the key")
	}
	e.clock.Add(2 * time.Minute)
	if _, err := e.db.ReleaseKey(ctx, storage.Release{Source: "pms", Key: "rp", Actor: "sam", Reason: "retry",
		Reprocess: true, StuckBefore: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	got := e.processingKeys(t)
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
	e.queue(t, "late", "l", time.Time{})
	e.clock.Add(time.Second)
	first := e.leaseOne(t)
	started := e.clock.Now()
	e.clock.Add(2 * time.Minute) // the first hand-off outlives its lease
	e.leaseOne(t)                // records it as interrupted; a second hand-off is in flight
	if got := e.processingKeys(t); !strings.Contains(got, "interrupted") {
		t.Fatalf("before the late outcome the page does not say interrupted: %q", got)
	}
	// The first hand-off's outcome comes late: the downstream answered 503.
	const why = "downstream answered 503"
	if e.finish(t, first, started, 503, why, storage.AttemptResult{NextAt: e.clock.Now().Add(time.Minute), LastError: why}) {
		t.Fatal("the late outcome moved the key, leased again since")
	}
	atts, err := e.db.Attempts(ctx, "pms", "late")
	if err != nil || len(atts) != 1 || atts[0].Status != 503 {
		t.Fatalf("attempts %+v, %v; want the late outcome in the interrupted row's place", atts, err)
	}
	if got := e.processingKeys(t); !strings.Contains(got, "HTTP 503") {
		t.Errorf("the key's last hand-off (this claim's, its outcome known late) is not shown: %q", got)
	}
}

// TestConsole_KeysEarlierClaimsInterruptedHidden: a delivery received just before a
// key's lease ended (its claim's UpdatedAt) and claimed after the key was released, the
// release recording the cut-off hand-off at the lease's end: the new claim, handed to
// no one yet, does not show the earlier claim's interrupted hand-off as its own.
func TestConsole_KeysEarlierClaimsInterruptedHidden(t *testing.T) {
	e := newConsoleEnv(t)
	e.queue(t, "race", "a", time.Time{})
	e.leaseOne(t)
	e.clock.Add(time.Minute - 50*time.Millisecond)
	received := e.clock.Now() // the new delivery is received (and queued) 50 ms before the lease ends
	e.clock.Add(100 * time.Millisecond)
	if _, err := e.db.ReleaseKey(context.Background(), storage.Release{Source: "pms", Key: "race", Actor: "sam", Reason: "stuck",
		StuckBefore: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	e.queue(t, "race", "b", received) // its claim commits after the release
	if got := e.processingKeys(t); strings.Contains(got, "interrupted") {
		t.Errorf("the new claim, never handed off, shows the previous claim's interrupted hand-off: %q", got)
	}
}
