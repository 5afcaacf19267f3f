package main

import (
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestConfig_AlertSettingsOutOfBounds: an alert rule's for, window or max_skew, or a
// channel's timeout, max_backoff or max_attempts, out of the bounds the README gives (a
// slip: "10000h" for "10m", "1ms" for "1m") stops serve with one line naming the table
// and the setting, rather than keep the rule silent or the channel failing with nothing
// to say so.
func TestConfig_AlertSettingsOutOfBounds(t *testing.T) {
	const src = `
[[source]]
name = "ota"
signature = "none"
key_fields = ["/id"]

[[alert_channel]]
name = "chat"
type = "slack"
url = "https://chat.example/hooks/abc"
`
	rule := func(kind, setting string) string {
		return "\n[[alert]]\nname = \"a\"\nkind = \"" + kind + "\"\nchannels = [\"chat\"]\n" + setting + "\n"
	}
	channel := func(setting string) string {
		return "\n[[alert_channel]]\nname = \"mail\"\ntype = \"slack\"\nurl = \"https://chat.example/hooks/def\"\n" + setting + "\n"
	}
	tests := []struct {
		name, toml string
		want       []string
	}{
		{"ForYears", rule("stuck_keys", `for = "10000h"`), []string{`alert "a"`, "for", "24h0m0s"}},
		{"WindowYears", rule("money_mismatch", `window = "10000h"`), []string{`alert "a"`, "window", "8760h0m0s"}},
		{"MaxSkewYears", rule("clock_skew", `max_skew = "10000h"`), []string{`alert "a"`, "max_skew", "24h0m0s"}},
		{"TimeoutTooShort", channel(`timeout = "1ms"`), []string{`alert_channel "mail"`, "timeout", "1s"}},
		{"MaxBackoffTooShort", channel(`max_backoff = "1ms"`), []string{`alert_channel "mail"`, "max_backoff", "1s"}},
		{"MaxBackoffTooLong", channel(`max_backoff = "10000h"`), []string{`alert_channel "mail"`, "max_backoff", "1h0m0s"}},
		{"MaxAttemptsTooMany", channel(`max_attempts = 1000000`), []string{`alert_channel "mail"`, "max_attempts", "100"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { serveRefuses(t, src+tc.toml, nil, tc.want) })
	}
}

// TestConfig_AlertWindowBesideLongRetention: a money_mismatch window of 60 days on a
// server that keeps deliveries 90 days counts what is kept: serve takes it.
func TestConfig_AlertWindowBesideLongRetention(t *testing.T) {
	r := alert.Rule{Name: "a", Kind: alert.KindMoneyMismatch, Window: 60 * 24 * time.Hour, Channels: []string{"chat"}}.WithDefaults()
	if err := r.Check(nil, []string{"chat"}); err != nil {
		t.Errorf("window of 60 days: %v", err)
	}
}
