package storage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_ReleaseKeys releases more keys than one transaction takes, with keys still in
// flight among them: those are refused one by one and the rest go on, each released
// key with its audit row.
func TestDB_ReleaseKeys(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	clk := newClock(db)
	dispatch := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}
	const stuck, busy = 230, 20 // stuck keys over several transactions, then keys in flight
	for i := range stuck {
		storagetest.Record(t, db, delivery("ota", fmt.Sprintf("stuck-%03d", i), "h"), dispatch)
	}
	clk.Add(time.Hour)
	for i := range busy {
		storagetest.Record(t, db, delivery("ota", fmt.Sprintf("busy-%03d", i), "h"), dispatch)
	}
	storagetest.Record(t, db, delivery("pms", "other-source", "h"), dispatch)
	rel := storage.Release{Actor: "sam", Reason: "downstream back", StuckBefore: clk.Now().Add(-10 * time.Minute)}

	out, err := db.ReleaseKeys(ctx, storage.KeyFilter{Source: "ota", State: storage.StateProcessing}, rel)
	if err != nil {
		t.Fatal(err)
	}
	changed, refused := 0, 0
	for _, o := range out {
		switch {
		case o.Changed && o.Err == nil && o.Previous == storage.StateProcessing:
			changed++
		case !o.Changed && errors.Is(o.Err, storage.ErrBusy):
			refused++
		default:
			t.Errorf("outcome %+v", o)
		}
	}
	if len(out) != stuck+busy || changed != stuck || refused != busy {
		t.Fatalf("%d outcomes, %d released, %d refused; want %d, %d, %d", len(out), changed, refused, stuck+busy, stuck, busy)
	}
	for _, k := range []struct{ key, state string }{{"stuck-000", storage.StateReleased}, {"stuck-229", storage.StateReleased},
		{"busy-000", storage.StateProcessing}, {"busy-019", storage.StateProcessing}} {
		if c, err := db.Claim(ctx, "ota", k.key); err != nil || c.State != k.state {
			t.Errorf("%s: %s, %v; want %s", k.key, c.State, err, k.state)
		}
	}
	if c, _ := db.Claim(ctx, "pms", "other-source"); c.State != storage.StateProcessing {
		t.Errorf("another source's key: %s", c.State)
	}
	log, err := db.AuditLog(ctx, 0, 1000)
	if err != nil || len(log) != stuck {
		t.Fatalf("%d audit rows, %v; want one per released key (%d)", len(log), err, stuck)
	}
	if log[0].Action != "release" || log[0].Actor != "sam" || log[0].Reason != "downstream back" {
		t.Errorf("audit row %+v", log[0])
	}

}
