package storagetest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestBulkLoad: the keys loaded are claimed, each with its accepted delivery, counted in
// the dashboard's totals, and intake goes on after them: the next delivery gets an id
// of its own, and a loaded key is a duplicate.
func TestBulkLoad(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := time.Now().Add(-time.Minute)
	var done []int
	err = storagetest.BulkLoad(ctx, db, storagetest.Fill{Source: "ota", Keys: 25, Batch: 10,
		Key: func(i int) string { return fmt.Sprintf("k%03d", i) }, ClaimedAt: at, TTL: time.Hour,
		Headers: "{}", Body: func(i int) []byte { return fmt.Appendf(nil, `{"i":%d}`, i) }},
		func(n int) { done = append(done, n) })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(done) != "[10 20 25]" {
		t.Fatalf("progress %v, want [10 20 25]", done)
	}
	c, err := db.Claim(ctx, "ota", "k024")
	if err != nil || c.State != storage.StateProcessed {
		t.Fatalf("claim of k024: %+v, %v", c, err)
	}
	d, err := db.Delivery(ctx, c.FirstDelivery)
	if err != nil || d.Key != "k024" || string(d.Body) != `{"i":24}` || d.Outcome != storage.Accepted {
		t.Fatalf("its delivery: %+v, %v", d, err)
	}
	if n, err := db.RollupStats(ctx, 100); err != nil || n != 0 {
		t.Fatalf("roll-up after the load: %d, %v; want nothing left", n, err)
	}
	dup := &storage.Delivery{Source: "ota", Key: "k003", KeyMethod: "event_id", PayloadHash: "x"}
	if err := db.Record(ctx, dup, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if dup.Outcome != storage.Duplicate || dup.ID != 26 {
		t.Fatalf("a loaded key again: %s with id %d, want a duplicate with id 26", dup.Outcome, dup.ID)
	}
	counts, err := storagetest.CountDeliveries(ctx, db, "ota")
	if err != nil || counts != (storagetest.Counts{Accepted: 25, Duplicate: 1, Mismatch: 1}) {
		t.Fatalf("counts %+v, %v", counts, err)
	}
}
