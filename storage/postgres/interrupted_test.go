package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
)

// TestReleaseEach_RefusedReprocessRecordsNoInterruption is the SQLite test of the same
// name in storagetest: a bulk reprocess refused "payload gone" writes no interrupted
// attempt, and the next lease records it once.
func TestReleaseEach_RefusedReprocessRecordsNoInterruption(t *testing.T) {
	ctx := context.Background()
	db := engine.Open(t)
	clk := enginetest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	engine.SetClock(db, clk.Now)
	d := &storage.Delivery{Source: "ota", Status: 200, Key: "k", KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{"id":"k"}`), ContentType: "application/json"}
	if err := db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	if jobs, err := db.LeaseDue(ctx, clk.Now(), time.Minute, 10, nil); err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v, %v", jobs, err)
	}
	if _, err := rawConn(t, db).Exec(ctx, `DELETE FROM deliveries WHERE id = $1`, d.ID); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Minute)
	out, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "k"}}, storage.Release{Actor: "sam",
		Reason: "r", Reprocess: true, StuckBefore: clk.Now().Add(time.Hour)})
	if err != nil || len(out) != 1 || out[0].Refused != storage.RefusedPayloadGone {
		t.Fatalf("bulk reprocess: %+v, %v; want refused, payload gone", out, err)
	}
	if atts, _ := db.Attempts(ctx, "ota", "k"); len(atts) != 0 {
		t.Errorf("a refused reprocess wrote %d attempt rows; want none", len(atts))
	}
	if _, err := db.LeaseDue(ctx, clk.Now(), time.Minute, 10, nil); err != nil {
		t.Fatal(err)
	}
	if atts, _ := db.Attempts(ctx, "ota", "k"); len(atts) != 1 {
		t.Errorf("after the next lease: %d attempt rows, want 1 interrupted hand-off", len(atts))
	}
}
