package receiver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestMetrics_ClaimDurationCommittedOnly: hookdedup_claim_duration_seconds is the time
// from arrival to a committed claim, so a delivery or batch the database could not take
// (answered 503) adds no observation: a locked or full database must not show as a
// histogram of fast claims beside the 503s.
func TestMetrics_ClaimDurationCommittedOnly(t *testing.T) {
	e := newEnv(t, sqlite.Options{BusyTimeout: 20 * time.Millisecond}, otaSource(t), adyenSource(t))
	count := func() float64 {
		v, _ := scrapeMetric(t, e.srv.URL, "hookdedup_claim_duration_seconds_count")
		return v
	}

	release := holdWriteLock(t, e.db.Path(), "BEGIN EXCLUSIVE")
	if code, a, _ := e.post(t, "ota", "msg_locked", `{"booking_id":"B1","status":"cancelled"}`, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("delivery while the database is locked: %d %+v, want 503", code, a)
	}
	if code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(adyenItem(t, "Z4HB8C2D6F1G9J3K", "REFUND", 41250))); code != http.StatusServiceUnavailable {
		t.Fatalf("batch while the database is locked: %d %+v, want 503", code, a)
	}
	if n := count(); n != 0 {
		t.Errorf("hookdedup_claim_duration_seconds_count = %v after two deliveries that were not stored, want 0", n)
	}

	release()
	if code, a, _ := e.post(t, "ota", "msg_free", `{"booking_id":"B1","status":"cancelled"}`, nil); code != http.StatusOK {
		t.Fatalf("delivery once the database is free: %d %+v, want 200", code, a)
	}
	if code, a := postBatch(t, e.srv.URL, "/webhooks/adyen", adyenBody(adyenItem(t, "Z4HB8C2D6F1G9J3K", "REFUND", 41250))); code != http.StatusOK {
		t.Fatalf("batch once the database is free: %d %+v, want 200", code, a)
	}
	if n := count(); n != 2 {
		t.Errorf("hookdedup_claim_duration_seconds_count = %v after a stored delivery and a stored batch, want 2", n)
	}
}
