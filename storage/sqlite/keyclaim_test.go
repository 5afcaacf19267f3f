package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// inKeyIndex reports whether delivery id is in the index of keys, and whether its row
// says that its claim finds it instead (by_claim).
func inKeyIndex(t *testing.T, path string, id int64) (indexed, byClaim bool) {
	t.Helper()
	raw := rawDB(t, path)
	var n int
	if err := raw.QueryRow(`SELECT count(*) FROM deliveries INDEXED BY deliveries_key
		WHERE id = ?1 AND (source, key) = (SELECT source, key FROM deliveries WHERE id = ?1)
		AND body_from = 0 AND by_claim = 0`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT by_claim FROM deliveries WHERE id = ?`, id).Scan(&byClaim); err != nil {
		t.Fatal(err)
	}
	return n > 0, byClaim
}

// wantKeyDeliveries fails unless the deliveries of source's key are exactly ids, oldest
// first, each with its body.
func wantKeyDeliveries(t *testing.T, db *sqlite.DB, source, key string, ids ...int64) {
	t.Helper()
	got, err := db.KeyDeliveries(context.Background(), source, key)
	if err != nil {
		t.Fatal(err)
	}
	var have []int64
	for _, d := range got {
		have = append(have, d.ID)
		if len(d.Body) == 0 {
			t.Errorf("KeyDeliveries(%s, %s): delivery %d without its body", source, key, d.ID)
		}
	}
	if fmt.Sprint(have) != fmt.Sprint(ids) {
		t.Errorf("KeyDeliveries(%s, %s) = %v, want %v", source, key, have, ids)
	}
}

// An accepted delivery that its claim names is found by its key through the claim and
// is not written to the index of keys: a new key writes a leaf of the claims' key index
// only. Each way a claim lets go of its first delivery puts that delivery in the index,
// so that the key still finds it: a takeover of the expired key, a release and a new
// claim, the expiry sweep. Duplicates that store their own body are in the index from
// the start, and those stored by reference are found through either.
func TestDB_KeyThroughClaim(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	clk := newClock(db)
	hour := storage.ClaimOptions{TTL: time.Hour}
	key := storage.DeliveryFilter{Key: "evt_1", Source: "ota"}

	first := storagetest.Record(t, db, delivery("ota", "evt_1", "h1"), hour)
	redelivery := storagetest.Record(t, db, withSignature(delivery("ota", "evt_1", "h1"), "v1,again"), hour)
	changed := storagetest.Record(t, db, delivery("ota", "evt_1", "h2"), hour)
	if first.Outcome != storage.Accepted || redelivery.Outcome != storage.Duplicate || !changed.Mismatch {
		t.Fatalf("outcomes %s, %s, mismatch %v", first.Outcome, redelivery.Outcome, changed.Mismatch)
	}
	if indexed, byClaim := inKeyIndex(t, db.Path(), first.ID); indexed || !byClaim {
		t.Errorf("accepted delivery: in the index of keys %v, found by its claim %v; want false, true", indexed, byClaim)
	}
	if indexed, _ := inKeyIndex(t, db.Path(), changed.ID); !indexed {
		t.Error("a duplicate with its own body is not in the index of keys")
	}
	wantListed(t, db, key, first.ID, redelivery.ID, changed.ID)
	wantListed(t, db, storage.DeliveryFilter{Key: "evt_1", KeySources: []string{"cm", "ota"}}, first.ID, redelivery.ID, changed.ID)
	wantKeyDeliveries(t, db, "ota", "evt_1", first.ID, redelivery.ID, changed.ID)

	// The key expired: a new delivery takes the claim over.
	clk.Add(2 * time.Hour)
	second := storagetest.Record(t, db, delivery("ota", "evt_1", "h3"), hour)
	if second.Outcome != storage.Accepted {
		t.Fatalf("after expiry: %s, want accepted", second.Outcome)
	}
	if indexed, byClaim := inKeyIndex(t, db.Path(), first.ID); !indexed || byClaim {
		t.Errorf("first delivery of a key taken over: in the index of keys %v, found by its claim %v", indexed, byClaim)
	}
	wantListed(t, db, key, first.ID, redelivery.ID, changed.ID, second.ID)
	wantKeyDeliveries(t, db, "ota", "evt_1", first.ID, redelivery.ID, changed.ID, second.ID)

	// Released, then claimed again.
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	third := storagetest.Record(t, db, delivery("ota", "evt_1", "h4"), hour)
	if third.Outcome != storage.Accepted {
		t.Fatalf("after release: %s, want accepted", third.Outcome)
	}
	thirdAgain := storagetest.Record(t, db, withSignature(delivery("ota", "evt_1", "h4"), "v1,again"), hour)
	wantListed(t, db, key, first.ID, redelivery.ID, changed.ID, second.ID, third.ID, thirdAgain.ID)

	// Expired and swept: the claim is gone, its first delivery and what refers to it stay.
	clk.Add(2 * time.Hour)
	if n, err := db.SweepExpired(ctx, db.Now(), 100); err != nil || n != 1 {
		t.Fatalf("SweepExpired = %d, %v; want 1", n, err)
	}
	if _, err := db.Claim(ctx, "ota", "evt_1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("claim after the sweep: %v", err)
	}
	for _, d := range []*storage.Delivery{first, second, third} {
		if indexed, byClaim := inKeyIndex(t, db.Path(), d.ID); !indexed || byClaim {
			t.Errorf("delivery %d of a swept key: in the index of keys %v, found by its claim %v", d.ID, indexed, byClaim)
		}
	}
	wantListed(t, db, key, first.ID, redelivery.ID, changed.ID, second.ID, third.ID, thirdAgain.ID)
	wantKeyDeliveries(t, db, "ota", "evt_1", first.ID, redelivery.ID, changed.ID, second.ID, third.ID, thirdAgain.ID)
	wantListed(t, db, storage.DeliveryFilter{Key: "evt_1", Source: "cm"})
}

// Two items of one request with one key, whose claim expires at once: the second takes
// the claim over from the first within the statement that claims both, before either
// row is written. The first is written into the index of keys, the second is found by
// its claim, and the key finds both.
func TestDB_KeyThroughClaim_TakenOverInOneBatch(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	newClock(db)
	a, b := delivery("ota", "evt_1", "h1"), delivery("ota", "evt_1", "h2")
	if err := db.RecordBatch(ctx, []*storage.Delivery{a, b}, storage.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if a.Outcome != storage.Accepted || b.Outcome != storage.Accepted {
		t.Fatalf("outcomes %s, %s; want both accepted (the key expires as it is claimed)", a.Outcome, b.Outcome)
	}
	if indexed, byClaim := inKeyIndex(t, db.Path(), a.ID); !indexed || byClaim {
		t.Errorf("first item: in the index of keys %v, found by its claim %v; want true, false", indexed, byClaim)
	}
	if indexed, byClaim := inKeyIndex(t, db.Path(), b.ID); indexed || !byClaim {
		t.Errorf("second item: in the index of keys %v, found by its claim %v; want false, true", indexed, byClaim)
	}
	wantKeyDeliveries(t, db, "ota", "evt_1", a.ID, b.ID)
}

// A delivery blocked by its business key loses its claim, which is deleted: it is then
// in the index of keys, and its key finds it.
func TestDB_KeyThroughClaim_Blocked(t *testing.T) {
	db := storagetest.Open(t)
	clk := newClock(db)
	opt := storage.ClaimOptions{TTL: 24 * time.Hour, BusinessWindow: time.Hour, BusinessBlocks: true}
	storagetest.Record(t, db, bk("ota", "evt_1", "B"), opt)
	clk.Add(time.Minute)
	blocked := storagetest.Record(t, db, bk("ota", "evt_2", "B"), opt)
	if blocked.Outcome != storage.Duplicate {
		t.Fatalf("outcome %s, want blocked as a duplicate", blocked.Outcome)
	}
	if indexed, byClaim := inKeyIndex(t, db.Path(), blocked.ID); !indexed || byClaim {
		t.Errorf("blocked delivery: in the index of keys %v, found by its claim %v; want true, false", indexed, byClaim)
	}
	wantListed(t, db, storage.DeliveryFilter{Key: "evt_2", Source: "ota"}, blocked.ID)
	wantKeyDeliveries(t, db, "ota", "evt_2", blocked.ID)
}

// A file from before accepted deliveries were found through their claims: every
// delivery is in the index of keys, and stays found by its key once upgraded, as do
// the deliveries stored after, whose claims then let go of them.
func TestOpen_KeyThroughClaimUpgrade(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	clk := newClock(db)
	hour := storage.ClaimOptions{TTL: time.Hour}
	old := storagetest.Record(t, db, delivery("ota", "evt_1", "h1"), hour)
	oldAgain := storagetest.Record(t, db, withSignature(delivery("ota", "evt_1", "h1"), "v1,again"), hour)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the schema of before: no by_claim, no triggers, every delivery that
	// stores its own body in the index of keys.
	execFile(t, path,
		`DROP TRIGGER claims_first_replaced`,
		`DROP TRIGGER claims_first_deleted`,
		`DROP INDEX deliveries_key`,
		`ALTER TABLE deliveries DROP COLUMN by_claim`,
		`CREATE INDEX deliveries_key ON deliveries (source, key) WHERE body_from = 0`,
		`DELETE FROM migrations WHERE name LIKE '%0022_%'`,
	)

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	db.Now = clk.Now
	if indexed, byClaim := inKeyIndex(t, path, old.ID); !indexed || byClaim {
		t.Errorf("delivery from before: in the index of keys %v, found by its claim %v; want true, false", indexed, byClaim)
	}
	wantKeyDeliveries(t, db, "ota", "evt_1", old.ID, oldAgain.ID)
	clk.Add(2 * time.Hour)
	taken := storagetest.Record(t, db, delivery("ota", "evt_1", "h2"), hour)
	if taken.Outcome != storage.Accepted {
		t.Fatalf("after expiry: %s, want accepted", taken.Outcome)
	}
	clk.Add(2 * time.Hour)
	if _, err := db.SweepExpired(ctx, db.Now(), 100); err != nil {
		t.Fatal(err)
	}
	wantKeyDeliveries(t, db, "ota", "evt_1", old.ID, oldAgain.ID, taken.ID)
	wantListed(t, db, storage.DeliveryFilter{Key: "evt_1", Source: "ota"}, old.ID, oldAgain.ID, taken.ID)
	raw := rawDB(t, path)
	var check string
	if err := raw.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q, %v", check, err)
	}
	var n int
	if err := raw.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'claims_first_%'`).Scan(&n); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d triggers of claims letting go of their first delivery, want 2", n)
	}
}
