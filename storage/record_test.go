package storage_test

import (
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestDelivery_Derivation(t *testing.T) {
	d := storage.Delivery{Key: "derived:366d36047c896d49e7cfe2fdcb12b8ef9084d388c6d425663d950175d11e90b8", KeyMethod: storage.MethodDerived,
		KeyCanonical: `{"/booking_id":"B-1","/nested":{"a":[1,2]},"/status":null}`, PayloadHash: "ph"}
	kd := d.Derivation()
	// sha256 of the canonical string above, computed independently (sha256sum).
	const want = "366d36047c896d49e7cfe2fdcb12b8ef9084d388c6d425663d950175d11e90b8"
	if len(kd.Fields) != 3 || kd.Fields[0] != (storage.Field{Pointer: "/booking_id", Present: true, Value: `"B-1"`}) ||
		kd.Fields[1] != (storage.Field{Pointer: "/nested", Present: true, Value: `{"a":[1,2]}`}) ||
		kd.Fields[2] != (storage.Field{Pointer: "/status", Present: false, Value: "null"}) ||
		kd.Hash != want || kd.Key != d.Key || kd.PayloadHash != "ph" || kd.Method != storage.MethodDerived {
		t.Fatalf("derivation = %+v", kd)
	}
	e := storage.Delivery{Key: "evt_1", KeyMethod: storage.MethodEventID, KeyFrom: "header:webhook-id"}.Derivation()
	if e.Hash != "" || e.Fields != nil || e.EventIDFrom != "header:webhook-id" || e.Key != "evt_1" {
		t.Fatalf("event id derivation = %+v", e)
	}
}

func TestClaim_Stuck(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	before := now.Add(-10 * time.Minute)
	for _, tc := range []struct {
		state string
		since time.Duration
		want  bool
	}{
		{storage.StateFailed, 0, true},
		{storage.StateProcessing, 11 * time.Minute, true},
		{storage.StateProcessing, 9 * time.Minute, false},
		{storage.StateProcessed, time.Hour, false},
		{storage.StateReleased, time.Hour, false},
	} {
		c := storage.Claim{State: tc.state, UpdatedAt: now.Add(-tc.since)}
		if got := c.Stuck(before); got != tc.want {
			t.Errorf("%s for %s: stuck = %v, want %v", tc.state, tc.since, got, tc.want)
		}
	}
}
