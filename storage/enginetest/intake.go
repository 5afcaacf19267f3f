package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestRecordBatch_ClaimExpiresWithin: the items of one request are claimed as if one
// after the other, even when the claim an earlier item made has expired by the time of
// a later item of its key: that item takes it over, and the items after it are its
// duplicates, their body the same byte for byte.
func TestRecordBatch_ClaimExpiresWithin(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	hour := storage.ClaimOptions{TTL: time.Hour}
	// item is how an item is recorded: its outcome, and the index of the item that is
	// its first delivery.
	type item struct {
		outcome storage.Outcome
		of      int
	}
	outcomes := func(items []*storage.Delivery, want ...item) {
		t.Helper()
		for i, w := range want {
			if d := items[i]; d.Outcome != w.outcome || d.FirstDelivery != items[w.of].ID {
				t.Errorf("item %d of %s: %s of %d, want %s of %d", i, d.Key, d.Outcome, d.FirstDelivery, w.outcome, items[w.of].ID)
			}
		}
	}

	at := db.Clock()
	b := items("adyen", "a", "a", "a", "b")
	b[0].ReceivedAt, b[3].ReceivedAt = at, at
	b[1].ReceivedAt = at.Add(2 * time.Hour) // past the first item's claim, an hour long
	b[2].ReceivedAt = at.Add(2*time.Hour + time.Minute)
	if err := db.RecordBatch(ctx, b, hour); err != nil {
		t.Fatal(err)
	}
	outcomes(b, item{storage.Accepted, 0}, item{storage.Accepted, 1}, item{storage.Duplicate, 1}, item{storage.Accepted, 3})
	c, err := db.Claim(ctx, "adyen", "a")
	if err != nil || c.FirstDelivery != b[1].ID || c.ExpiresAt.UnixMilli() != b[1].ReceivedAt.Add(time.Hour).UnixMilli() {
		t.Fatalf("claim %+v, %v; want held by item 1 until an hour after it", c, err)
	}
	got, err := db.Delivery(ctx, b[2].ID)
	if err != nil || got.Outcome != storage.Duplicate || got.FirstDelivery != b[1].ID || string(got.Body) != string(b[2].Body) {
		t.Fatalf("stored item 2: %+v, %v", got, err)
	}
}
