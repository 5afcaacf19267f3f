package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// withBusinessKey is refund(key) with business for its business key.
func withBusinessKey(key, business string) *storage.Delivery {
	d := refund(key)
	d.PayloadHash, d.BusinessKey, d.Property, d.Booking = "h-"+key, business, "p1", "b1"
	return d
}

// TestOpen_BulkKeysUpgrade: a release previewed by a version that did not keep its
// keys' first deliveries, and run after the upgrade. A key whose claim was as the
// preview found it at the upgrade gets its first delivery then, and is released once
// swept, as by any release. One swept before the upgrade cannot be told from a later
// claim of its key by its trace: it is skipped, which forgets nothing, and its
// business key still flags.
func TestOpen_BulkKeysUpgrade(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	db := openEngine(t, url)
	// Only an operator may start an action.
	storagetest.CreateUser(t, db, "ann", storage.RoleOperator, "a password of some length")
	clk := storagetest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	db.Now = clk.Now
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour}
	storagetest.Record(t, db, withBusinessKey("evt_1", "B1"), opt)
	storagetest.Record(t, db, withBusinessKey("evt_2", "B2"), storage.ClaimOptions{TTL: 3 * time.Hour, BusinessWindow: 24 * time.Hour})
	clk.Add(2 * time.Hour)
	a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{Source: "ota"},
		Reason: "check", Actor: "ann", StuckBefore: clk.Now()})
	if err != nil || a.Total != 2 {
		t.Fatalf("preview: %+v, %v; want evt_1 and evt_2", a, err)
	}
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want evt_1 swept", n, err)
	}
	db.Close()
	conn := postgrestest.Connect(t, url)
	for _, q := range []string{`ALTER TABLE bulk_action_keys DROP COLUMN first_delivery`,
		`DELETE FROM migrations WHERE name = 'migrations/0017_bulk_key_first_delivery.sql'`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	db = openEngine(t, url)
	db.Now = clk.Now
	clk.Add(2 * time.Hour)
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep after the upgrade: %d, %v; want evt_2 swept", n, err)
	}
	if _, err := db.StartBulkAction(ctx, a.ID, "ann", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := db.ClaimBulkAction(ctx, "r1", time.Minute); !ok || err != nil {
		t.Fatalf("claim the action: %v, %v", ok, err)
	}
	for range 10 {
		b, err := db.RunBulkBatch(ctx, a.ID, "r1", clk.Now(), 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if b.Over {
			break
		}
	}
	ks, err := db.BulkKeys(ctx, a.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, k := range ks {
		outcomes = append(outcomes, k.Key+" "+k.Outcome)
	}
	if want := []string{"evt_1 " + storage.BulkKeySkipped, "evt_2 " + storage.BulkKeyChanged}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %q; want %q", outcomes, want)
	}
	if again := storagetest.Record(t, db, withBusinessKey("evt_3", "B1"), opt); !slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send of evt_1's event, skipped: flags %v, want its business key", again.Suspects)
	}
	if again := storagetest.Record(t, db, withBusinessKey("evt_4", "B2"), opt); slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send of evt_2's event, released: flags %v, want its business key forgotten", again.Suspects)
	}
}
