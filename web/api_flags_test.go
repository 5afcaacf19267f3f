package web_test

import (
	"testing"
)

// TestAPI_DeliveriesCarryFlags: each delivery of GET /api/v1/deliveries carries
// money_mismatch and flags, an empty list when nothing flags it, not null nor absent.
func TestAPI_DeliveriesCarryFlags(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "evt_plain", `{"booking_id":"BK-1","status":"cancelled"}`, false)
	code, out := e.call(t, "viewer", "GET", "/api/v1/deliveries", "")
	if code != 200 {
		t.Fatalf("GET /api/v1/deliveries: %d %v", code, out)
	}
	list, _ := out["deliveries"].([]any)
	if len(list) != 1 {
		t.Fatalf("want 1 delivery, got %v", out)
	}
	d := list[0].(map[string]any)
	if _, ok := d["money_mismatch"]; !ok {
		t.Errorf("the delivery has no money_mismatch: %v", d)
	}
	if flags, ok := d["flags"].([]any); !ok || len(flags) != 0 {
		t.Errorf("the delivery's flags: %#v, want an empty list when nothing flags it: %v", d["flags"], d)
	}
	code, one := e.call(t, "viewer", "GET", "/api/v1/deliveries/"+d["id"].(string), "")
	if code != 200 {
		t.Fatalf("GET the delivery: %d %v", code, one)
	}
	if flags, ok := one["delivery"].(map[string]any)["flags"].([]any); !ok || len(flags) != 0 {
		t.Errorf("GET /api/v1/deliveries/{id}: flags %#v, want an empty list", one["delivery"])
	}
}
