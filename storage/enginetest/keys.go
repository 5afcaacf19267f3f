package enginetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// claimKeys are the source/key names of cs, in order.
func claimKeys(cs []storage.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Source + "/" + c.Key
	}
	return out
}

// TestKeys: the keys listings filter by source, state and stuckness, page newest first
// by their cursor (stuck keys: the longest stuck first, on one page), and StuckCounts
// counts what the stuck listing lists.
func TestKeys(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	// In id order: ota/failed, ota/old (processing since long), pms/old, ota/done,
	// ota/released, ota/fresh (processing, not stuck), pms/fresh.
	record(t, db, delivery("ota", "failed", "h"), dispatchDay)
	handOff(t, db, "failed", storage.AttemptResult{Failed: true, LastError: "downstream answered 500"})
	clk.Add(time.Second)
	record(t, db, delivery("ota", "old", "h"), dispatchDay)
	record(t, db, delivery("pms", "old", "h"), dispatchDay)
	record(t, db, delivery("ota", "done", "h"), day)
	record(t, db, delivery("ota", "released", "h"), day)
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "released", Actor: "sam", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Hour)
	record(t, db, delivery("ota", "fresh", "h"), dispatchDay)
	record(t, db, delivery("pms", "fresh", "h"), dispatchDay)
	stuckBefore := clk.Now().Add(-10 * time.Minute)

	for _, tc := range []struct {
		f    storage.KeyFilter
		want []string
	}{
		{storage.KeyFilter{}, []string{"pms/fresh", "ota/fresh", "ota/released", "ota/done", "pms/old", "ota/old", "ota/failed"}},
		{storage.KeyFilter{Source: "ota"}, []string{"ota/fresh", "ota/released", "ota/done", "ota/old", "ota/failed"}},
		{storage.KeyFilter{State: storage.StateProcessing}, []string{"pms/fresh", "ota/fresh", "pms/old", "ota/old"}},
		{storage.KeyFilter{State: storage.StateProcessing, Source: "pms"}, []string{"pms/fresh", "pms/old"}},
		{storage.KeyFilter{State: storage.StateFailed}, []string{"ota/failed"}},
		{storage.KeyFilter{State: storage.StateReleased}, []string{"ota/released"}},
		{storage.KeyFilter{State: storage.StateProcessed}, []string{"ota/done"}},
		{storage.KeyFilter{State: storage.StateProcessed, Source: "pms"}, nil},
		{storage.KeyFilter{Source: "nope"}, nil},
		// Stuck: the longest stuck first, whatever their ids.
		{storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore}, []string{"ota/failed", "ota/old", "pms/old"}},
		{storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Source: "pms"}, []string{"pms/old"}},
		{storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, State: storage.StateFailed}, []string{"ota/failed"}},
		{storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, State: storage.StateProcessed}, nil},
	} {
		p, err := db.Keys(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := claimKeys(p.Keys); !slices.Equal(got, tc.want) || p.Next != 0 || p.Partial {
			t.Errorf("Keys(%+v) = %v, next %d, partial %v; want %v on one page", tc.f, got, p.Next, p.Partial, tc.want)
		}
		all, err := db.ListKeys(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := claimKeys(all); !slices.Equal(got, tc.want) {
			t.Errorf("ListKeys(%+v) = %v; want %v", tc.f, got, tc.want)
		}
	}

	// Pages of two, by the cursor, cover every key once.
	var paged []string
	f := storage.KeyFilter{Limit: 2}
	for range 10 {
		p, err := db.Keys(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Keys) > 2 {
			t.Fatalf("a page of %d keys, want at most 2", len(p.Keys))
		}
		paged = append(paged, claimKeys(p.Keys)...)
		if p.Next == 0 {
			break
		}
		if p.Next != p.Keys[len(p.Keys)-1].ID {
			t.Fatalf("next %d, want the last key's id %d", p.Next, p.Keys[len(p.Keys)-1].ID)
		}
		f.Before = p.Next
	}
	if want := []string{"pms/fresh", "ota/fresh", "ota/released", "ota/done", "pms/old", "ota/old", "ota/failed"}; !slices.Equal(paged, want) {
		t.Errorf("paged %v, want %v", paged, want)
	}
	if ks, err := db.ListKeys(ctx, storage.KeyFilter{Source: "ota", Limit: 2}); err != nil || !slices.Equal(claimKeys(ks), []string{"ota/fresh", "ota/released"}) {
		t.Errorf("ListKeys with a limit: %v, %v; want the two newest", claimKeys(ks), err)
	}
	// A stuck listing is one page: its cursor only leaves that key out.
	stuck, err := db.Keys(ctx, storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(stuck.Keys); !slices.Equal(got, []string{"ota/failed", "ota/old"}) || stuck.Next != 0 {
		t.Errorf("stuck page of 2: %v, next %d; want the two longest stuck and no next page", got, stuck.Next)
	}

	counts, err := db.StuckCounts(ctx, stuckBefore)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"ota": 2, "pms": 1}; !maps.Equal(counts, want) {
		t.Errorf("StuckCounts = %v, want %v", counts, want)
	}
	// An hour on, the fresh keys are stuck too.
	if counts, err := db.StuckCounts(ctx, clk.Now().Add(time.Hour)); err != nil || !maps.Equal(counts, map[string]int{"ota": 3, "pms": 2}) {
		t.Errorf("StuckCounts an hour on = %v, %v; want ota 3, pms 2", counts, err)
	}
	if counts, err := db.StuckCounts(ctx, time.Time{}); err != nil || !maps.Equal(counts, map[string]int{"ota": 1}) {
		t.Errorf("StuckCounts with nothing processing stuck = %v, %v; want the failed key alone", counts, err)
	}
}

// TestKeys_ScanWindow: a keys listing that checks each claim (here a source with one old
// key below many of another) searches a bounded stretch of claims per page and says so;
// following Next finds what lies below; listings with matches in reach are unaffected,
// and ListKeys (bulk releases) stays exhaustive.
func TestKeys_ScanWindow(t *testing.T, e Engine) {
	if testing.Short() {
		t.Skip("stores many claims")
	}
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	rare := record(t, db, delivery("rare", "old", "h"), day)
	const n = storage.ScanWindow + 10
	batch := make([]*storage.Delivery, 0, 1000)
	for i := range n {
		batch = append(batch, delivery("ota", fmt.Sprintf("k%06d", i), "h"))
		if len(batch) == cap(batch) || i == n-1 {
			if err := db.RecordBatch(ctx, batch, day); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}

	f := storage.KeyFilter{Source: "rare"}
	p, err := db.Keys(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Keys) != 0 || !p.Partial || p.Next == 0 {
		t.Fatalf("first page: %v, partial %v, next %d; want an empty partial page", claimKeys(p.Keys), p.Partial, p.Next)
	}
	f.Before = p.Next
	if p, err = db.Keys(ctx, f); err != nil {
		t.Fatal(err)
	}
	if len(p.Keys) != 1 || p.Keys[0].Key != rare.Key || p.Next != 0 || p.Partial {
		t.Fatalf("second page: %v, partial %v, next %d; want the rare key and the end", claimKeys(p.Keys), p.Partial, p.Next)
	}

	for _, f := range []storage.KeyFilter{{Limit: 10}, {Source: "ota", Limit: 10}, {State: storage.StateProcessed, Limit: 10}} {
		p, err := db.Keys(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Keys) != 10 || p.Partial || p.Next != p.Keys[9].ID || p.Keys[0].Key != fmt.Sprintf("k%06d", n-1) {
			t.Errorf("%+v: %v, partial %v, next %d; want the 10 newest keys and a next page", f, claimKeys(p.Keys), p.Partial, p.Next)
		}
	}

	all, err := db.ListKeys(ctx, storage.KeyFilter{Source: "rare"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Key != rare.Key {
		t.Fatalf("ListKeys: %v, want the rare key", claimKeys(all))
	}
}

// TestClaimHeld_AgreesWithIntake: Claim.Held says of each state, in and past its ttl,
// what intake does with the key's next delivery: a duplicate exactly when held. A key
// being handed downstream is held past its ttl.
func TestClaimHeld_AgreesWithIntake(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	hour := storage.ClaimOptions{TTL: time.Hour, Dispatch: true}
	for _, k := range []string{"processing", "processed", "failed", "released", "processing-late", "processed-late", "failed-late"} {
		record(t, db, delivery("ota", k, "h"), hour)
	}
	// Released before the dispatcher leases it: a key whose attempt is under way is not
	// released.
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "released", Actor: "sam", Reason: "r",
		StuckBefore: clk.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	for _, j := range lease(t, db, clk.Now(), time.Minute, 10) {
		var res storage.AttemptResult
		switch strings.TrimSuffix(j.Key, "-late") {
		case "processed":
			res = storage.AttemptResult{Done: true}
		case "failed":
			res = storage.AttemptResult{Failed: true, LastError: "refused"}
		default:
			continue
		}
		if _, err := db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, StartedAt: clk.Now()}, res); err != nil {
			t.Fatal(err)
		}
	}
	check := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			c, err := db.Claim(ctx, "ota", k)
			if err != nil {
				t.Fatal(err)
			}
			held := c.Held(clk.Now())
			d := record(t, db, delivery("ota", k, "h"), hour)
			if dup := d.Outcome == storage.Duplicate; dup != held {
				t.Errorf("%s (%s, expires %v, now %v): Held = %v, but intake made its next delivery %s",
					k, c.State, c.ExpiresAt, clk.Now(), held, d.Outcome)
			}
		}
	}
	check("processing", "processed", "failed", "released")
	clk.Add(2 * time.Hour)
	check("processing-late", "processed-late", "failed-late")
}
