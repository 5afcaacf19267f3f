package receiver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReceiver_ClockSkewMillisecondsLeftOut: a sender that signs its time in
// milliseconds where the scheme takes seconds is refused (its 401 says so), and its
// deliveries are left out of the clock skew: read as seconds they are tens of
// thousands of years ahead, and counted they would have the dashboard and the
// clock_skew alert blame this machine's clock for a sender's slip.
func TestReceiver_ClockSkewMillisecondsLeftOut(t *testing.T) {
	now := time.Unix(1767225600, 0)
	rc, send := otaAt(t, now)
	for i := range 5 {
		w := send(i, time.Unix(now.UnixMilli(), 0)) // the header then holds milliseconds
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "in milliseconds") {
			t.Fatalf("delivery %d signed in milliseconds: %d %s, want 401 saying so", i, w.Code, w.Body)
		}
	}
	if median, n := rc.ClockSkew(); n != 0 {
		t.Errorf("ClockSkew = %v over %d after deliveries signed in milliseconds alone, want none counted", median, n)
	}
	for i := 5; i < 8; i++ {
		if w := send(i, now.Add(2*time.Minute)); w.Code != http.StatusOK {
			t.Fatalf("delivery %d: %d %s", i, w.Code, w.Body)
		}
	}
	if median, n := rc.ClockSkew(); median != 2*time.Minute || n != 3 {
		t.Errorf("ClockSkew = %v over %d, want 2m0s over the 3 deliveries signed in seconds", median, n)
	}
}
