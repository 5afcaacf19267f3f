package storagetest

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestReleaseEach_RefusedReprocessRecordsNoInterruption: a bulk reprocess refused for its
// payload ("payload gone") writes nothing, though a bulk action commits the rest of its
// batch: the key is unchanged, and the next lease records its interrupted hand-off
// once, not twice.
func TestReleaseEach_RefusedReprocessRecordsNoInterruption(t *testing.T) {
	ctx := context.Background()
	db := Open(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	db.Now = func() time.Time { return now }
	d := &storage.Delivery{Source: "ota", Status: 200, Key: "k", KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{"id":"k"}`), ContentType: "application/json"}
	if err := db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	if jobs, err := db.LeaseDue(ctx, now, time.Minute, 10, nil); err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v, %v", jobs, err)
	}
	// The process holding the lease is killed; the payload is gone (a legacy claim whose
	// delivery is not stored: the dispatcher's payloadProblem handles such keys).
	raw := rawConn(t, db)
	if _, err := raw.Exec(`DELETE FROM deliveries WHERE id = ?`, d.ID); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	now = now.Add(2 * time.Minute)
	out, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "k"}}, storage.Release{Actor: "sam",
		Reason: "r", Reprocess: true, StuckBefore: now.Add(time.Hour)})
	if err != nil || len(out) != 1 || out[0].Refused != storage.RefusedPayloadGone {
		t.Fatalf("bulk reprocess: %+v, %v; want refused, payload gone", out, err)
	}
	atts, err := db.Attempts(ctx, "ota", "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 0 {
		t.Errorf("a refused reprocess wrote %d attempt rows (%q); want none", len(atts), atts[0].Error)
	}
	if _, err := db.LeaseDue(ctx, now, time.Minute, 10, nil); err != nil {
		t.Fatal(err)
	}
	atts, _ = db.Attempts(ctx, "ota", "k")
	if len(atts) != 1 {
		t.Errorf("after the next lease: %d attempt rows, want 1 interrupted hand-off", len(atts))
	}
}
