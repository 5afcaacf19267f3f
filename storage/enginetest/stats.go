package enginetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestDeliveryStats(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	from := c.Now().Truncate(time.Hour)
	recordEvent(t, db, "ota", "a", "h", "P", "B1", "cancelled", "100.25")
	recordEvent(t, db, "ota", "a", "h2", "P", "B1", "cancelled", "110.25") // duplicate, mismatch
	c.Add(2 * time.Hour)
	recordEvent(t, db, "ota", "b", "h", "P", "B2", "cancelled", "50")
	recordEvent(t, db, "ota", "b", "h", "P", "B2", "cancelled", "50")
	if n, err := db.RollupStats(ctx, 3); err != nil || n != 3 {
		t.Fatalf("first roll-up: %d, %v; want 3", n, err)
	}
	record(t, db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 400}, day)
	if n, err := db.RollupStats(ctx, 100); err != nil || n != 2 {
		t.Fatalf("second roll-up: %d, %v; want the 2 left", n, err)
	}
	if n, err := db.RollupStats(ctx, 100); err != nil || n != 0 {
		t.Fatalf("third roll-up: %d, %v; want nothing left", n, err)
	}

	got, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Minute), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range got {
		fmt.Fprintf(&b, "%s %s %s n=%d mm=%d amt=%d/%s\n", s.Start.Sub(from), s.Source, s.Outcome, s.Deliveries, s.Mismatches, s.WithAmount, storage.FormatMinor(s.Minor, s.Currency))
	}
	want := `0s ota accepted n=1 mm=0 amt=1/100.25
0s ota duplicate n=1 mm=1 amt=1/110.25
2h0m0s ota accepted n=1 mm=0 amt=1/50.00
2h0m0s ota duplicate n=1 mm=0 amt=1/50.00
2h0m0s ota rejected n=1 mm=0 amt=0/0.00
`
	if b.String() != want {
		t.Fatalf("stats:\n%s\nwant:\n%s", b.String(), want)
	}
	dups, err := db.RecentDuplicates(ctx, from, 10)
	if err != nil || len(dups) != 2 || dups[0].Amount != "50" {
		t.Fatalf("recent duplicates = %v, %v", dups, err)
	}
}

// TestDB_RollupStats_Concurrent checks that calls racing over the same deliveries count
// each of them once: the counting reads outside the write transaction, so two calls can
// count the same stretch, and only the one that moves the mark may add its counts.
func TestRollupStats_Concurrent(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	from := c.Now().Truncate(time.Hour)
	const events = 300
	for i := range events {
		recordEvent(t, db, "ota", fmt.Sprint("k", i), "h", "P", "B", "cancelled", "1")
	}
	// Each call stops at its first 0: caught up, or it lost a race to a call that then
	// goes on, so the last winner always finishes the stretch.
	var wg sync.WaitGroup
	var folded atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				n, err := db.RollupStats(ctx, 7)
				if err != nil {
					t.Error(err)
				}
				if n == 0 || err != nil {
					return
				}
				folded.Add(int64(n))
			}
		})
	}
	wg.Wait()
	if n, err := db.RollupStats(ctx, 1000); err != nil || n != 0 {
		t.Fatalf("roll-up after the racing calls: %d, %v; want nothing left", n, err)
	}
	got, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var counted int64
	for _, s := range got {
		counted += s.Deliveries
	}
	if counted != events || folded.Load() != events {
		t.Fatalf("stats count %d deliveries, calls reported %d folded; want %d each", counted, folded.Load(), events)
	}
}

// TestDB_DeliveryStats_NotRolledUp: the deliveries received since the last roll-up are
// counted as the stats are read, once, and reading them leaves the roll-up its work.
func TestDeliveryStats_NotRolledUp(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	from := c.Now().Truncate(time.Hour)
	stats := func() string {
		t.Helper()
		got, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, s := range got {
			fmt.Fprintf(&b, "%s n=%d mm=%d amt=%d/%s\n", s.Outcome, s.Deliveries, s.Mismatches, s.WithAmount, storage.FormatMinor(s.Minor, s.Currency))
		}
		return b.String()
	}
	recordEvent(t, db, "ota", "a", "h", "P", "B1", "cancelled", "100.25")
	recordEvent(t, db, "ota", "a", "h2", "P", "B1", "cancelled", "110.25")
	want := "accepted n=1 mm=0 amt=1/100.25\nduplicate n=1 mm=1 amt=1/110.25\n"
	if got := stats(); got != want {
		t.Fatalf("before any roll-up:\n%swant:\n%s", got, want)
	}
	if n, err := db.RollupStats(ctx, 100); err != nil || n != 2 {
		t.Fatalf("roll-up after reading the stats: %d, %v; want the 2 read, still to fold", n, err)
	}
	if got := stats(); got != want {
		t.Fatalf("rolled up:\n%swant:\n%s", got, want)
	}
	recordEvent(t, db, "ota", "a", "h", "P", "B1", "cancelled", "100.25")
	want = "accepted n=1 mm=0 amt=1/100.25\nduplicate n=2 mm=1 amt=2/210.50\n"
	if got := stats(); got != want {
		t.Fatalf("rolled up and not:\n%swant:\n%s", got, want)
	}
}

// TestDB_DeliveryStats_UnknownNamesTogether: the hourly totals are kept for good, and
// whoever reaches the port can ask for new source names without end; so the rejections
// of names that no source has (404) are totalled under one row, stored or only counted,
// before and after the roll-up, while a configured source's rejections keep its name.
func TestDeliveryStats_UnknownNamesTogether(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	from := c.Now().Truncate(time.Hour)
	for i := range 3 {
		record(t, db, &storage.Delivery{Source: fmt.Sprintf("junk-%d", i), Outcome: storage.Rejected,
			Status: storage.StatusUnknownSource}, day)
	}
	record(t, db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401}, day)
	if err := db.AddRejectionCounts(ctx, []storage.RejectionCount{
		{Source: "junk-9", Status: storage.StatusUnknownSource, Minute: c.Now(), Rejections: 5},
		{Source: "ota", Status: 401, Minute: c.Now(), Rejections: 2},
	}); err != nil {
		t.Fatal(err)
	}
	totals := func() string {
		t.Helper()
		got, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Hour), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, s := range got {
			fmt.Fprintf(&b, "%q %s n=%d\n", s.Source, s.Outcome, s.Deliveries)
		}
		return b.String()
	}
	const want = `"" rejected n=8
"ota" rejected n=3
`
	if got := totals(); got != want {
		t.Fatalf("before the roll-up:\n%s\nwant:\n%s", got, want)
	}
	if _, err := db.RollupStats(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if got := totals(); got != want {
		t.Fatalf("after the roll-up:\n%s\nwant:\n%s", got, want)
	}
	// Each name is still in the counts that retention sweeps.
	if n, err := db.RejectionsNotStored(ctx, storage.DeliveryFilter{Source: "junk-9"}); err != nil || n != 5 {
		t.Fatalf("junk-9 counted %d, %v; want 5", n, err)
	}
}
