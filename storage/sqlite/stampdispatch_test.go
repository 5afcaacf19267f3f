package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestRecord_ClockSetBackDispatchesAtOnce: the clock ran 30 minutes fast and NTP set it
// right. A delivery received right after the correction is stamped at the last receipt
// time (storage.ReceivedAfter), 30 minutes ahead of the clock; its key is still due
// downstream at once, from when it arrived, not once the clock catches up with the stamp.
func TestRecord_ClockSetBackDispatchesAtOnce(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	clk := newClock(db)
	dispatch := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}

	d1 := delivery("ota", "evt_fast", "h1")
	if err := db.Record(ctx, d1, dispatch); err != nil {
		t.Fatal(err)
	}
	if jobs, err := db.LeaseDue(ctx, clk.Now(), time.Minute, 10, nil); err != nil || len(jobs) != 1 {
		t.Fatalf("first delivery: %d jobs due (%v), want 1", len(jobs), err)
	}

	clk.Add(-30 * time.Minute) // NTP corrects the clock
	d2 := delivery("ota", "evt_after_fix", "h2")
	if err := db.Record(ctx, d2, dispatch); err != nil {
		t.Fatal(err)
	}
	t.Logf("received at clock %v, stamped %v", clk.Now(), d2.ReceivedAt)
	jobs, err := db.LeaseDue(ctx, clk.Now(), time.Minute, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, j := range jobs {
		if j.Key == "evt_after_fix" {
			found = true
		}
	}
	if !found {
		next, _ := db.NextDue(ctx, nil)
		t.Errorf("a delivery accepted after the clock was set back is not due for dispatch at once: next due %v, clock %v (%v late)",
			next, clk.Now(), next.Sub(clk.Now()))
	}
}
