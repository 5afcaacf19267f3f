package sqlite_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

func TestDB_Keys_ScanWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many claims")
	}
	ctx := context.Background()
	db := storagetest.Open(t)
	c := newClock(db)
	rare := MustRecordEvent(t, db, "rare", "old", "h", "P", "B", "cancelled", "")
	err := storagetest.BulkLoad(ctx, db, storagetest.Fill{Source: "ota", Keys: storage.ScanWindow + 10,
		ClaimedAt: c.Now(), TTL: 24 * time.Hour, Headers: "{}",
		Key:  func(i int) string { return fmt.Sprintf("k%06d", i) },
		Body: func(int) []byte { return []byte("{}") }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(ks []storage.Claim) []string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Source+"/"+k.Key)
		}
		return out
	}

	f := storage.KeyFilter{Source: "rare"}
	p, err := db.Keys(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Keys) != 0 || !p.Partial || p.Next == 0 {
		t.Fatalf("first page: %v, partial %v, next %d; want an empty partial page", keys(p.Keys), p.Partial, p.Next)
	}
	f.Before = p.Next
	if p, err = db.Keys(ctx, f); err != nil {
		t.Fatal(err)
	}
	if len(p.Keys) != 1 || p.Keys[0].Key != rare.Key || p.Next != 0 || p.Partial {
		t.Fatalf("second page: %v, partial %v, next %d; want the rare key and the end", keys(p.Keys), p.Partial, p.Next)
	}

	for _, f := range []storage.KeyFilter{{Limit: 10}, {Source: "ota", Limit: 10}, {State: storage.StateProcessed, Limit: 10}} {
		p, err := db.Keys(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Keys) != 10 || p.Partial || p.Next != p.Keys[9].ID || p.Keys[0].Key != fmt.Sprintf("k%06d", storage.ScanWindow+9) {
			t.Errorf("%+v: %v, partial %v, next %d; want the 10 newest keys and a next page", f, keys(p.Keys), p.Partial, p.Next)
		}
	}

	all, err := db.ListKeys(ctx, storage.KeyFilter{Source: "rare"})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Key != rare.Key {
		t.Fatalf("ListKeys: %v, want the rare key", keys(all))
	}
}

// TestDB_Keys_Plans checks that the keys listings and the stuck-keys count are answered
// through their indexes, in their order, within their windows.
func TestDB_Keys_Plans(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	// The keys listings walk the claims newest first or read claims_unsettled; none may
	// read a whole source's claims through the UNIQUE index to sort them.
	after := storage.KeyCursor{UpdatedAt: time.Now(), ID: 5}
	for _, f := range []storage.KeyFilter{{}, {Source: "ota"}, {State: storage.StateProcessed},
		{Source: "ota", State: storage.StateReleased, Before: 5}, {State: storage.StateFailed},
		{Source: "ota", State: storage.StateProcessing}, {Stuck: true}, {Stuck: true, Source: "ota", After: after},
		{Stuck: true, After: after}, {Stuck: true, State: storage.StateFailed, After: after}} {
		for _, window := range []bool{false, true} {
			plan, err := db.ExplainKeys(ctx, f, window)
			if err != nil {
				t.Fatal(err)
			}
			tab := !f.Stuck && (f.State == storage.StateFailed || f.State == storage.StateProcessing)
			released := f.State == storage.StateReleased
			if strings.Contains(plan, "autoindex") || f.Stuck != regexp.MustCompile(`\bclaims_unsettled\b`).MatchString(plan) ||
				tab != strings.Contains(plan, "claims_unsettled_id") || released != strings.Contains(plan, "claims_released") {
				t.Errorf("keys plan for %+v (window %v):\n%s", f, window, plan)
			}
			// Every listing comes in its index's order: a sort would read every unsettled
			// key to show the processing and failed tabs.
			if strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("keys plan for %+v sorts:\n%s", f, plan)
			}
			// A stuck page after a cursor seeks to it: the keys of its millisecond after
			// it, then those of later ones; not every unsettled key from the oldest.
			if !f.After.IsZero() && (strings.Contains(plan, "SCAN") ||
				!strings.Contains(plan, "INDEX claims_unsettled (updated_at=? AND rowid>?)") ||
				!strings.Contains(plan, "INDEX claims_unsettled (updated_at>?)")) {
				t.Errorf("stuck keys plan for %+v does not start at its cursor:\n%s", f, plan)
			}
			// Keys bounds a walk that checks each claim to a window of ids.
			walk := !f.Stuck && !tab && !released && (f.Source != "" || f.State != "")
			if window && walk && (!strings.Contains(plan, "rowid>? AND rowid<?") || !strings.Contains(plan, "rowid<?)\n")) {
				t.Errorf("keys plan for %+v does not keep to its window:\n%s", f, plan)
			}
		}
	}
	// The stuck-keys count runs every 15 s and on the dashboard: it must read the
	// unsettled keys only, and from an index alone: not every claim, nor each unsettled
	// claim's row, nor a sort to group them.
	plan, err := db.ExplainStuckCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "COVERING INDEX claims_stuck") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("stuck counts plan:\n%s", plan)
	}
}
