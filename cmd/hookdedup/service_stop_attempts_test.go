package main

import (
	"testing"
	"time"
)

// TestService_StopTimeoutCoversAnAttempt: a stop finishes the hand-offs under way, and
// the dispatcher hands off until the drain of the requests in flight is over, so the
// last one may end attempt_timeout after it. With attempt_timeout raised for a slow
// downstream (3m), the unit's TimeoutStopSec must outlast the drain and that attempt,
// or systemd kills serve mid-hand-off and the downstream is sent the event again.
func TestService_StopTimeoutCoversAnAttempt(t *testing.T) {
	cfg := writeConfig(t, openSource+`forward_url = "http://127.0.0.1:9000/events"
attempt_timeout = "3m"
`)
	unit := generateUnits(t, "/bin/true", "--config", cfg)["hookdedup.service"]
	got := directives(unit, "TimeoutStopSec")
	if len(got) == 0 {
		t.Fatalf("the unit sets no TimeoutStopSec\n%s", unit)
	}
	d, err := time.ParseDuration(got[len(got)-1])
	// The default drain (70 s), the rejection counts (10 s) and the attempt (3 m).
	if err != nil || d < 70*time.Second+10*time.Second+3*time.Minute {
		t.Errorf("TimeoutStopSec=%q, want at least the drain and an attempt begun at its end, 4m20s", got)
	}
}
