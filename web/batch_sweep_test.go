package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestEvents_BatchItemCountAfterPartialSweep: retention deletes the items of a batched
// request one by one (a duplicate is never owed; an item still owed downstream is kept,
// and so is the first item, which holds the envelope). The last item of a three-item
// request still reads "Item 3 of 3", not a place past the end of its own batch.
func TestEvents_BatchItemCountAfterPartialSweep(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	item := func(key string) *storage.Delivery {
		return &storage.Delivery{Source: "pms", Status: 200, Key: key, KeyMethod: "event_id", KeyFrom: "/event_id",
			PayloadHash: "h-" + key, ContentType: "application/json", Body: []byte(`{"event_id":"` + key + `"}`)}
	}
	// A request of three items: a, a again (its duplicate), b; a and b owed downstream.
	items := []*storage.Delivery{item("rv_a"), item("rv_a"), item("rv_b")}
	items[0].BatchEnvelope = `{"EnterpriseId":"e-1"}`
	if err := e.db.RecordBatch(ctx, items, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	if items[1].Outcome != storage.Duplicate {
		t.Fatalf("item 1: %s, want a duplicate", items[1].Outcome)
	}
	// Retention, days later: the duplicate goes, the owed items and the first stay.
	e.clock.Add(72 * time.Hour)
	now := e.clock.Now()
	cur := storage.SweepCursor{}
	for range 20 {
		var err error
		if _, cur, err = e.db.SweepDeliveries(ctx, now, now.Add(-24*time.Hour), cur, 100); err != nil {
			t.Fatal(err)
		}
		if cur.Finished {
			break
		}
	}
	if _, err := e.db.Delivery(ctx, items[1].ID); err == nil {
		t.Skip("the sweep kept the duplicate: nothing to show")
	}
	if _, err := e.db.Delivery(ctx, items[2].ID); err != nil {
		t.Fatalf("the owed item was swept: %v", err)
	}
	c := e.as(t, "viewer")
	code, p := c.page(fmt.Sprintf("/events/%d", items[2].ID))
	if code != http.StatusOK {
		t.Fatalf("GET = %d", code)
	}
	got := p.testid("batch").tag("h2").text()
	if want := fmt.Sprintf("Item 3 of 3 of batch %d", items[0].ID); got != want {
		t.Fatalf("batch heading %q, want %q (the request had 3 items; the item is not past its end)", got, want)
	}
}
