package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_RecordBatch_AllOrNothing forces one item's insert to fail and checks that none
// of its siblings, and none of their claims, are stored, while a delivery that shared
// the writer's transaction still commits.
func TestDB_RecordBatch_AllOrNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	raw := poisonDeliveries(t, path)

	var wg sync.WaitGroup
	var batchErr error
	others := make([]*storage.Delivery, 20)
	for i := range others {
		others[i] = delivery("ota", "other-"+strings.Repeat("x", i), "h")
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		batchErr = db.RecordBatch(ctx, items("adyen", "a", "b", "poison", "c"), day)
	}()
	for _, d := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := db.Record(ctx, d, day); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if batchErr == nil || !strings.Contains(batchErr.Error(), "forced failure") {
		t.Fatalf("RecordBatch = %v, want the forced failure", batchErr)
	}
	var rows, claims int
	if err := raw.QueryRow(`SELECT count(*) FROM deliveries WHERE source = 'adyen'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM claims WHERE source = 'adyen'`).Scan(&claims); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || claims != 0 {
		t.Fatalf("after a failed item: %d deliveries and %d claims of its batch stored, want none", rows, claims)
	}
	for _, d := range others {
		if d.Outcome != storage.Accepted {
			t.Fatalf("a delivery beside the failed batch: %s, want accepted", d.Outcome)
		}
	}

	// Without the poison, the same request stores whole.
	if _, err := raw.Exec(`DROP TRIGGER poison`); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordBatch(ctx, items("adyen", "a", "b", "poison", "c"), day); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM deliveries WHERE source = 'adyen'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 4 {
		t.Fatalf("stored %d items, want 4", rows)
	}
}

// items makes the deliveries of one batched request, one per key.
func items(source string, keys ...string) []*storage.Delivery {
	out := make([]*storage.Delivery, len(keys))
	for i, k := range keys {
		out[i] = delivery(source, k, "hash-"+k)
	}
	return out
}
