package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestSweepDeliveries_KeepsWhatRollupsHaveNotCounted: serve restarts after a night off
// (or another process wrote the last deliveries), with a short retention: the retention
// sweep and the roll-ups start together, and the sweep's first round runs at once. The
// deliveries the roll-up had not folded yet are still counted by the dashboard and the
// ledger once retention has deleted them: their days keep their counts.
func TestSweepDeliveries_KeepsWhatRollupsHaveNotCounted(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db) // 2026-11-30 12:00 UTC
	start := clk.Now()
	for _, amount := range []string{"100.00", "20.50"} {
		key := "evt_" + amount
		recordEvent(t, db, "ota", key, "h", "P1", "B1", "cancelled", amount)
		d := recordEvent(t, db, "ota", key, "h", "P1", "B1", "cancelled", amount)
		if d.Outcome != storage.Duplicate {
			t.Fatalf("second delivery of %s: %s, want duplicate", key, d.Outcome)
		}
	}
	// serve starts again two hours later, on another handle (a new process: nothing
	// in memory of what the first one stored); retention is one hour.
	clk.Add(2 * time.Hour)
	again := e.Reopen(t, db)
	var from storage.SweepCursor
	var swept int64
	for range 100 {
		n, next, err := again.SweepDeliveries(ctx, clk.Now(), clk.Now().Add(-time.Hour), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		swept += n
		if from = next; next.Done() {
			break
		}
	}
	for range 100 {
		n, err := again.RollupStats(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	t.Logf("retention swept %d deliveries", swept)

	stats, err := again.DeliveryStats(ctx, start.Truncate(time.Hour), clk.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var accepted, duplicates int64
	for _, b := range stats {
		switch b.Outcome {
		case storage.Accepted:
			accepted += b.Deliveries
		case storage.Duplicate:
			duplicates += b.Deliveries
		}
	}
	if accepted != 2 || duplicates != 2 {
		t.Errorf("dashboard after retention: %d accepted, %d duplicates; want 2 and 2 (retention deleted them before the roll-up counted them)", accepted, duplicates)
	}
	l, err := again.Ledger(ctx, storage.LedgerFilter{From: start.Truncate(24 * time.Hour), To: start.Add(48 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var caught storage.Money
	for _, r := range l.Totals {
		caught.Add(r.Caught)
	}
	if caught.Count != 2 || caught.Minor != 12050 {
		t.Errorf("ledger after retention: caught %+v; want 2 duplicates, EUR 120.50 in all", caught)
	}
}

// TestSweepDeliveries_ClockBehindNotEarly: the machine booted with its clock days
// behind (a Raspberry Pi without a real-time clock restores the time it shut down at)
// and NTP set it right a few minutes later. The deliveries received meanwhile carry
// stamps from the past, but their ids say they came after deliveries received since the
// cutoff: retention keeps them.
func TestSweepDeliveries_ClockBehindNotEarly(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db) // 2026-11-30 12:00 UTC
	before := record(t, db, delivery("ota", "evt_before_reboot", "h"), day)
	clk.Add(-40 * 24 * time.Hour) // rebooted with the clock 40 days behind
	during := record(t, db, delivery("ota", "evt_during", "h"), day)
	clk.Set(time.Date(2026, 11, 30, 12, 10, 0, 0, time.UTC)) // NTP set it right, ten minutes on
	after := record(t, db, delivery("ota", "evt_after", "h"), day)

	sweepAll(t, db, clk.Now().Add(-720*time.Hour), 100) // retention = 720h, the default
	for _, d := range []*storage.Delivery{before, during, after} {
		if _, err := db.Delivery(ctx, d.ID); err != nil {
			t.Errorf("delivery %d (%s), received ten minutes ago, after the 720h retention sweep: %v; want kept", d.ID, d.Key, err)
		}
	}
}
