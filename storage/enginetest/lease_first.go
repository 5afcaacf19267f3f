package enginetest

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestLeaseFirstDue: a dispatcher owes each source a worker and leases the sources owed
// one together: one job of each at most, its oldest due, the oldest of those first up
// to the limit; a source named twice is still leased one job; a key not due yet, a
// source not named and a key leased already are left; no source leases nothing.
func TestLeaseFirstDue(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	for _, k := range []struct{ source, key string }{
		{"ota", "o1"}, {"pms", "p1"}, {"ota", "o2"}, {"pms", "p2"}, {"cm", "c1"}, {"other", "x1"}, {"ota", "o3"},
	} {
		record(t, db, delivery(k.source, k.key, "h"), dispatchDay)
		clk.Add(time.Second)
	}
	now := clk.Now()
	first := func(limit int, sources ...string) []string {
		t.Helper()
		jobs, err := db.LeaseFirstDue(ctx, now, time.Minute, limit, sources)
		if err != nil {
			t.Fatal(err)
		}
		return jobKeys(jobs)
	}
	if got := first(10); len(got) != 0 {
		t.Fatalf("leased %v of no source; want nothing", got)
	}
	if got := first(2, "ota", "pms", "cm"); !slices.Equal(got, []string{"o1", "p1"}) {
		t.Fatalf("leased %v, 2 at most; want the oldest of ota and of pms, o1 and p1", got)
	}
	if got := first(10, "ota", "pms", "cm", "ota"); !slices.Equal(got, []string{"o2", "p2", "c1"}) {
		t.Fatalf("leased %v; want the oldest due of each source named, once, o2, p2 and c1", got)
	}
	if got := first(10, "ota", "pms", "cm"); !slices.Equal(got, []string{"o3"}) {
		t.Fatalf("leased %v; want o3, all that is left due of those sources", got)
	}
	if jobs, err := db.LeaseDue(ctx, now, time.Minute, 10, nil); err != nil || !slices.Equal(jobKeys(jobs), []string{"x1"}) {
		t.Fatalf("left due: %v, %v; want x1 alone, of the source never named", jobKeys(jobs), err)
	}
	if c, err := db.Claim(ctx, "ota", "o3"); err != nil || !c.NextAttemptAt.After(now) {
		t.Fatalf("o3 after its lease: %+v, %v; want it leased", c, err)
	}
	// Not due yet: received after now.
	clk.Add(time.Minute)
	record(t, db, delivery("cm", "c2", "h"), dispatchDay)
	if got := first(10, "cm"); len(got) != 0 {
		t.Fatalf("leased %v at %v; want nothing, c2 is not due until later", got, now)
	}
}
