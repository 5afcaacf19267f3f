package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestRecord_ClockSetBackDispatchesAtOnce: the clock ran 30 minutes fast and NTP set it
// right. A delivery received right after the correction is stamped at the last receipt
// time (storage.ReceivedAfter), 30 minutes ahead of the clock; its key is still due
// downstream at once, from when it arrived, not once the clock catches up with the stamp.
func TestRecord_ClockSetBackDispatchesAtOnce(t *testing.T) {
	ctx := context.Background()
	db := openEngine(t, postgrestest.NewDatabase(t))
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	db.Now = func() time.Time { return now }
	dispatch := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}
	d1 := &storage.Delivery{Source: "ota", Status: 200, Key: "evt_fast", KeyMethod: "event_id", PayloadHash: "h1",
		Body: []byte(`{"id":"evt_fast"}`), ContentType: "application/json"}
	if err := db.Record(ctx, d1, dispatch); err != nil {
		t.Fatal(err)
	}
	if jobs, err := db.LeaseDue(ctx, now, time.Minute, 10, nil); err != nil || len(jobs) != 1 {
		t.Fatalf("first delivery: %d jobs due (%v), want 1", len(jobs), err)
	}
	now = now.Add(-30 * time.Minute) // NTP corrects the clock
	d2 := &storage.Delivery{Source: "ota", Status: 200, Key: "evt_after_fix", KeyMethod: "event_id", PayloadHash: "h2",
		Body: []byte(`{"id":"evt_after_fix"}`), ContentType: "application/json"}
	if err := db.Record(ctx, d2, dispatch); err != nil {
		t.Fatal(err)
	}
	t.Logf("received at clock %v, stamped %v", now, d2.ReceivedAt)
	jobs, err := db.LeaseDue(ctx, now, time.Minute, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Key == "evt_after_fix" {
			return
		}
	}
	next, _ := db.NextDue(ctx, nil)
	t.Errorf("a delivery accepted after the clock was set back is not due for dispatch at once: next due %v, clock %v (%v late)",
		next, now, next.Sub(now))
}
