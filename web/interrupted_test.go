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
