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
// by their cursor (stuck keys: the longest stuck first, by theirs), and StuckCounts
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
	// A stuck listing goes on from After, never Before.
	stuck, err := db.Keys(ctx, storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got, last := claimKeys(stuck.Keys), stuck.Keys[len(stuck.Keys)-1]; !slices.Equal(got, []string{"ota/failed", "ota/old"}) || stuck.Next != 0 ||
		stuck.After != (storage.KeyCursor{UpdatedAt: last.UpdatedAt, ID: last.ID, StuckBefore: stuckBefore}) {
		t.Errorf("stuck page of 2: %v, next %d, after %v; want the two longest stuck and the second's cursor", got, stuck.Next, stuck.After)
	}
	stuck, err = db.Keys(ctx, storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 2, After: stuck.After})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(stuck.Keys); !slices.Equal(got, []string{"pms/old"}) || !stuck.After.IsZero() {
		t.Errorf("stuck page after it: %v, after %v; want the last stuck key and no next page", got, stuck.After)
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

// stuckKeys records n keys of ota and pms (one in five) handed downstream, in batches of
// batch keys, each batch a millisecond after the one before, so that many keys share
// one updated_at; an hour later one key in ten fails its attempt and enters failed then,
// all in one millisecond again, behind keys of higher ids; the others' attempts stay
// under way for a minute. It returns the keys' names, the time before which a processing
// key is stuck, and the database's clock.
func stuckKeys(t *testing.T, e Engine, db storage.Store, n, batch int) (names []string, stuckBefore time.Time, clk *Clock) {
	t.Helper()
	ctx := context.Background()
	clk = newClock(e, db)
	var ds []*storage.Delivery
	for i := range n {
		source := "ota"
		if i%5 == 0 {
			source = "pms"
		}
		ds = append(ds, delivery(source, fmt.Sprintf("k%03d", i), "h"))
		names = append(names, source+"/"+ds[len(ds)-1].Key)
		if len(ds) == batch || i == n-1 {
			if err := db.RecordBatch(ctx, ds, dispatchDay); err != nil {
				t.Fatal(err)
			}
			ds = ds[:0]
			clk.Add(time.Millisecond)
		}
	}
	clk.Add(time.Hour)
	for _, j := range lease(t, db, clk.Now(), time.Minute, 2*n) {
		var i int
		if _, err := fmt.Sscanf(j.Key, "k%d", &i); err != nil || i%10 != 3 {
			continue
		}
		a := storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery, StartedAt: clk.Now(), Error: "downstream answered 503"}
		if moved, err := db.FinishAttempt(ctx, j, a, storage.AttemptResult{Failed: true, LastError: a.Error}); err != nil || !moved {
			t.Fatalf("fail %s: moved %v, %v", j.Key, moved, err)
		}
	}
	return names, clk.Now().Add(-10 * time.Minute), clk
}

// stuckOrder is keys (source/key) in a stuck listing's order, longest stuck first and
// by id among keys of one millisecond, as each key's claim says.
func stuckOrder(t *testing.T, db storage.Store, keys []string) []string {
	t.Helper()
	claims := make([]storage.Claim, len(keys))
	for i, k := range keys {
		source, key, _ := strings.Cut(k, "/")
		c, err := db.Claim(context.Background(), source, key)
		if err != nil {
			t.Fatal(err)
		}
		claims[i] = c
	}
	slices.SortFunc(claims, func(a, b storage.Claim) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return claimKeys(claims)
}

// stuckPages follows a stuck listing of f from its first page through After, its cursor
// taken through its wire form as the console and the API carry it, calling between
// after each page but the last. It returns the keys listed and each page's size.
func stuckPages(t *testing.T, db storage.Store, f storage.KeyFilter, between func(page []storage.Claim)) (keys []string, sizes []int) {
	t.Helper()
	for range 100 {
		p, err := db.Keys(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if p.Next != 0 || p.Partial {
			t.Fatalf("stuck page: next %d, partial %v; want neither", p.Next, p.Partial)
		}
		keys, sizes = append(keys, claimKeys(p.Keys)...), append(sizes, len(p.Keys))
		if p.After.IsZero() {
			return keys, sizes
		}
		if last := p.Keys[len(p.Keys)-1]; p.After != (storage.KeyCursor{UpdatedAt: last.UpdatedAt, ID: last.ID, StuckBefore: f.StuckBefore}) {
			t.Fatalf("after %v, want the last key's cursor (%v, %d)", p.After, last.UpdatedAt, last.ID)
		}
		if between != nil {
			between(p.Keys)
		}
		if f.After, err = storage.ParseKeyCursor(p.After.String()); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("a stuck listing did not end in 100 pages")
	return nil, nil
}

// TestKeys_StuckPages: a stuck listing of more keys than a page, many of one millisecond
// and a page ending among them, is paged by its cursor oldest first, each key once,
// by source as well, and ListKeys lists the same keys in the same order.
func TestKeys_StuckPages(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	names, stuckBefore, _ := stuckKeys(t, e, db, 250, 60)
	want := stuckOrder(t, db, names)
	if want[len(want)-1] != "ota/k243" {
		t.Fatalf("test setup: the key of the highest id to fail is not the last stuck: %v", want[len(want)-5:])
	}
	f := storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 100}
	first, err := db.Keys(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	second, err := db.Keys(ctx, storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 100, After: first.After})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Keys) == 0 || !first.Keys[99].UpdatedAt.Equal(second.Keys[0].UpdatedAt) {
		t.Fatal("test setup: the first page does not end among keys of one millisecond")
	}

	got, sizes := stuckPages(t, db, f, nil)
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{100, 100, 50}) {
		t.Errorf("paged %d keys in pages of %v, want %d in pages of 100, 100, 50; first difference at %d",
			len(got), sizes, len(want), firstDiff(got, want))
	}

	var pms []string
	for _, k := range want {
		if strings.HasPrefix(k, "pms/") {
			pms = append(pms, k)
		}
	}
	got, sizes = stuckPages(t, db, storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Source: "pms", Limit: 20}, nil)
	if !slices.Equal(got, pms) || !slices.Equal(sizes, []int{20, 20, 10}) {
		t.Errorf("paged pms: %v in pages of %v, want %v in pages of 20, 20, 10", got, sizes, pms)
	}

	all, err := db.ListKeys(ctx, storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimKeys(all); !slices.Equal(got, want) {
		t.Errorf("ListKeys: first difference with the stuck order at %d", firstDiff(got, want))
	}
}

// TestKeys_StuckPagesWhileChanging: keys released between pages (the last one shown,
// the cursor's own, among them) make no other key skipped or shown twice; a key
// released before its page comes is not shown; a key shown that then fails enters
// failed now, and so comes again at the end, failed.
func TestKeys_StuckPagesWhileChanging(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	names, stuckBefore, clk := stuckKeys(t, e, db, 40, 7)
	want := stuckOrder(t, db, names)
	clk.Add(2 * time.Minute) // past the attempts under way: a key in one is not released
	release := func(k string) {
		t.Helper()
		source, key, _ := strings.Cut(k, "/")
		r, err := db.ReleaseKey(ctx, storage.Release{Source: source, Key: key, Actor: "sam", Reason: "downstream back", StuckBefore: stuckBefore})
		if err != nil || !r.Changed {
			t.Fatalf("release %s: %+v, %v", k, r, err)
		}
	}
	var failed string
	pages := 0
	got, _ := stuckPages(t, db, storage.KeyFilter{Stuck: true, StuckBefore: stuckBefore, Limit: 10}, func(page []storage.Claim) {
		pages++
		if pages != 1 {
			return
		}
		release(want[9])  // the cursor's own key
		release(want[0])  // one shown before it
		release(want[14]) // one of the next page, not shown yet
		for _, k := range want[1:9] {
			if strings.HasPrefix(k, "ota/") && !strings.HasSuffix(k, "3") {
				failed = k
				break
			}
		}
		_, key, _ := strings.Cut(failed, "/")
		handOff(t, db, key, storage.AttemptResult{Failed: true, LastError: "downstream answered 500"})
	})
	expect := append(slices.Delete(slices.Clone(want), 14, 15), failed)
	if !slices.Equal(got, expect) {
		t.Errorf("paged %v\nwant   %v", got, expect)
	}
	if c, err := db.Claim(ctx, "ota", strings.TrimPrefix(failed, "ota/")); err != nil || c.State != storage.StateFailed {
		t.Errorf("%s: %s, %v; want failed", failed, c.State, err)
	}
}

// firstDiff is the first index at which a and b differ, or the shorter's length.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
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
