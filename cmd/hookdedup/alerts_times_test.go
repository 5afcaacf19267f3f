package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestConfig_AlertTimesZeroRefused: `times = 0` written out on a downstream_failing
// rule is refused, naming the setting, as max_attempts = 0 is, rather than read as the
// default 3.
func TestConfig_AlertTimesZeroRefused(t *testing.T) {
	const cfg = `
[[source]]
name = "ota"
signature = "none"
key_fields = ["/id"]

[[alert]]
name = "pms-down"
kind = "downstream_failing"
times = 0
`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := runInContext(t, ctx, cfg, nil, "", "serve", "--addr", "127.0.0.1:0")
	if err == nil || ctx.Err() != nil {
		t.Fatalf("serve with times = 0: %v; want a refusal naming times", err)
	}
	if !strings.Contains(err.Error(), "times") {
		t.Errorf("error %q does not name times", err)
	}
}
