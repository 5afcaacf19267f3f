package enginetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestRejectionCounts(t *testing.T, e Engine) {
	db := e.Open(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	e.SetClock(db, func() time.Time { return t0.Add(90 * time.Minute) })
	add := func(counts ...storage.RejectionCount) {
		t.Helper()
		if err := db.AddRejectionCounts(ctx, counts); err != nil {
			t.Fatal(err)
		}
	}
	add(storage.RejectionCount{Source: "ota", Status: 401, Minute: t0, Rejections: 100},
		storage.RejectionCount{Source: "nope", Status: 404, Minute: t0.Add(30 * time.Second), Rejections: 7},
		storage.RejectionCount{Source: "", Status: 404, Minute: t0.Add(time.Minute), Rejections: 3})
	// The same minute, name and status again adds up; a later hour stands apart.
	add(storage.RejectionCount{Source: "ota", Status: 401, Minute: t0.Add(59 * time.Second), Rejections: 20},
		storage.RejectionCount{Source: "ota", Status: 413, Minute: t0.Add(61 * time.Minute), Rejections: 5})
	// One rejection stored as a delivery: the counts are of the others only.
	if err := db.Record(ctx, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401, Error: "signature"},
		storage.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		f    storage.DeliveryFilter
		want int64
	}{
		{"All", storage.DeliveryFilter{}, 135},
		{"Rejected", storage.DeliveryFilter{Outcome: storage.Rejected}, 135},
		{"Source", storage.DeliveryFilter{Source: "ota"}, 125},
		{"UnknownName", storage.DeliveryFilter{Source: "nope"}, 7},
		{"FromMinute", storage.DeliveryFilter{From: t0.Add(time.Minute)}, 8},
		{"FromWithinMinute", storage.DeliveryFilter{From: t0.Add(30 * time.Second)}, 135},
		{"To", storage.DeliveryFilter{To: t0.Add(time.Minute)}, 127},
		{"ToWithinMinute", storage.DeliveryFilter{To: t0.Add(61 * time.Second)}, 130},
		{"Hour", storage.DeliveryFilter{From: t0, To: t0.Add(time.Hour)}, 130},
		{"Accepted", storage.DeliveryFilter{Outcome: storage.Accepted}, 0},
		{"Duplicate", storage.DeliveryFilter{Outcome: storage.Duplicate}, 0},
		{"Key", storage.DeliveryFilter{Key: "k"}, 0},
		{"Booking", storage.DeliveryFilter{Booking: "BK-1"}, 0},
		{"Property", storage.DeliveryFilter{Property: "HTL"}, 0},
		{"Status", storage.DeliveryFilter{Status: "cancelled"}, 0},
		{"Mismatch", storage.DeliveryFilter{Mismatch: true}, 0},
		{"MoneyMismatch", storage.DeliveryFilter{MoneyMismatch: true}, 0},
		{"Currency", storage.DeliveryFilter{Currency: "EUR"}, 0},
		{"HasAmount", storage.DeliveryFilter{HasAmount: true}, 0},
		{"Flag", storage.DeliveryFilter{Flag: storage.FlagAny}, 0},
		{"FlagState", storage.DeliveryFilter{FlagState: "open"}, 0},
		{"Batch", storage.DeliveryFilter{Batch: 1}, 0},
		{"NoPropertyNoCurrency", storage.DeliveryFilter{NoProperty: true, NoCurrency: true, Source: "ota"}, 125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := db.RejectionsNotStored(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("%d rejections not stored, want %d", got, tc.want)
			}
		})
	}

	// The dashboard's totals hold every rejection: counted and stored.
	rejected := func() map[time.Time]int64 {
		t.Helper()
		if _, err := db.RollupStats(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		stats, err := db.DeliveryStats(ctx, t0, t0.Add(2*time.Hour), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		out := map[time.Time]int64{}
		for _, b := range stats {
			if b.Outcome == storage.Rejected {
				out[b.Start] += b.Deliveries
			}
		}
		return out
	}
	want := map[time.Time]int64{t0: 130, t0.Add(time.Hour): 5 + 1}
	if got := rejected(); len(got) != 2 || got[t0] != want[t0] || got[t0.Add(time.Hour)] != want[t0.Add(time.Hour)] {
		t.Fatalf("dashboard's rejected per hour: %v, want %v", got, want)
	}

	// The sweep takes minutes before its cutoff, a batch at a time; the dashboard keeps them.
	n, err := db.SweepRejectionCounts(ctx, t0.Add(time.Minute), 1)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want 1 row", n, err)
	}
	n, err = db.SweepRejectionCounts(ctx, t0.Add(time.Minute), 100)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want 1 more row", n, err)
	}
	if got, _ := db.RejectionsNotStored(ctx, storage.DeliveryFilter{}); got != 8 {
		t.Fatalf("after the sweep: %d rejections not stored, want 8", got)
	}
	if got := rejected(); got[t0] != want[t0] {
		t.Fatalf("the sweep changed the dashboard's totals: %v", got)
	}
}

// TestRejectionCounts_TwoHandles: handles on one database (replicas, or processes)
// adding to the same minute's counts at once lose none of them.
func TestRejectionCounts_TwoHandles(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	const perHandle, adds = 4, 10
	errs := make(chan error, 2*perHandle)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, db := range []storage.Store{a, b} {
		for range perHandle {
			wg.Go(func() {
				<-start
				for range adds {
					// Both names, in both orders: the rows of one call are taken in one
					// transaction.
					err := db.AddRejectionCounts(ctx, []storage.RejectionCount{
						{Source: "ota", Status: 401, Minute: t0, Rejections: 2},
						{Source: "cm", Status: 401, Minute: t0, Rejections: 1},
						{Source: "ota", Status: 401, Minute: t0, Rejections: 1},
					})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const calls = 2 * perHandle * adds
	for source, want := range map[string]int64{"ota": 3 * calls, "cm": calls} {
		got, err := b.RejectionsNotStored(ctx, storage.DeliveryFilter{Source: source})
		if err != nil || got != want {
			t.Errorf("%s: %d rejections counted (%v), want %d", source, got, err, want)
		}
	}
}

// TestRejectionCounts_OddNames: an unknown name asked for in a URL may hold a NUL byte
// or invalid UTF-8; counting it must not fail, or the batch it came in would be lost,
// and it is found again by the same name.
func TestRejectionCounts_OddNames(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	err := db.AddRejectionCounts(ctx, []storage.RejectionCount{
		{Source: "a\x00b", Status: storage.StatusUnknownSource, Minute: t0, Rejections: 2},
		{Source: "\xffx", Status: storage.StatusUnknownSource, Minute: t0, Rejections: 3},
		{Source: "ota", Status: 401, Minute: t0, Rejections: 1},
	})
	if err != nil {
		t.Fatalf("add counts of odd names: %v", err)
	}
	if n, err := db.RejectionsNotStored(ctx, storage.DeliveryFilter{Source: "a\x00b"}); err != nil || n != 2 {
		t.Fatalf("the name with a NUL byte: %d %v, want 2", n, err)
	}
	if n, err := db.RejectionsNotStored(ctx, storage.DeliveryFilter{}); err != nil || n != 6 {
		t.Fatalf("all: %d %v, want 6", n, err)
	}
}
