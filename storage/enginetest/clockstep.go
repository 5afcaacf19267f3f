package enginetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestRecord_ClockSetBackStampsInOrder: the machine's clock ran five minutes fast over
// midnight (UTC) and NTP set it right. A delivery received after the correction is
// stamped no earlier than the one stored before it, so that receipt times still grow
// with ids: the events of each day (the list, its CSV, the ledger's links) are exactly
// the deliveries whose receipt times fall in it, as the ledger and the dashboard count
// them. A clock set back by more than an hour is left as it was.
func TestRecord_ClockSetBackStampsInOrder(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	nov30 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	dec1 := nov30.Add(24 * time.Hour)

	clk.Set(nov30.Add(23 * time.Hour))
	record(t, db, delivery("ota", "evt_early", "h"), day) // Nov 30, 23:00
	clk.Set(dec1.Add(2 * time.Minute))
	fast := record(t, db, delivery("ota", "evt_fast", "h"), day) // "Dec 1, 00:02": the clock ran 5 min fast
	clk.Set(dec1.Add(-2 * time.Minute))                          // set right: Nov 30, 23:58
	late := record(t, db, delivery("ota", "evt_late", "h"), day)
	if !late.ReceivedAt.Equal(fast.ReceivedAt) {
		t.Errorf("received after the clock was set back: stamped %v, want %v (the delivery before it)", late.ReceivedAt, fast.ReceivedAt)
	}
	if stored, err := db.Delivery(ctx, late.ID); err != nil || !stored.ReceivedAt.Equal(late.ReceivedAt) {
		t.Errorf("stored as %v (%v), want %v", stored.ReceivedAt, err, late.ReceivedAt)
	}

	list := func(from, to time.Time) []string {
		t.Helper()
		var got []string
		err := db.EachDelivery(ctx, storage.DeliveryFilter{From: from, To: to}, func(d storage.Delivery) error {
			got = append(got, d.Key)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	for _, c := range []struct {
		from, to time.Time
		want     []string
	}{
		{nov30, dec1, []string{"evt_early"}},
		{dec1, dec1.Add(24 * time.Hour), []string{"evt_fast", "evt_late"}},
	} {
		if got := list(c.from, c.to); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("events received from %v to %v = %v, want %v", c.from, c.to, got, c.want)
		}
	}

	// Set back by two hours: a clock that was wrong, not corrected; left as it is.
	clk.Set(dec1.Add(-2 * time.Hour))
	wrong := record(t, db, delivery("ota", "evt_wrong", "h"), day)
	if !wrong.ReceivedAt.Equal(dec1.Add(-2 * time.Hour)) {
		t.Errorf("received with the clock two hours back: stamped %v, want the clock's %v", wrong.ReceivedAt, dec1.Add(-2*time.Hour))
	}
}

// TestNewestReceivedAt: the retention sweep checks the clock at a start against the
// newest delivery's receipt time (a clock stepped forward while serve was down would
// have it delete every delivery): none in an empty database, then the last one stored.
func TestNewestReceivedAt(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	if at, err := db.NewestReceivedAt(ctx); err != nil || !at.IsZero() {
		t.Fatalf("empty database: %v, %v; want the zero time", at, err)
	}
	record(t, db, delivery("ota", "evt_1", "h"), day)
	clk.Add(time.Hour)
	want := clk.Now()
	record(t, db, delivery("ota", "evt_2", "h"), day)
	if at, err := db.NewestReceivedAt(ctx); err != nil || !at.Equal(want) {
		t.Errorf("newest delivery received at %v (%v), want %v", at, err, want)
	}
}
