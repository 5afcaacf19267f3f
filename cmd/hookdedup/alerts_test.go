package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestConfig_AlertErrors: each mistake in an [[alert]] or [[alert_channel]] table stops
// serve with one line naming the table and the setting, never a secret.
func TestConfig_AlertErrors(t *testing.T) {
	const src = `
[[source]]
name = "ota"
signature = "none"
key_fields = ["/id"]
`
	tests := []struct {
		name, toml string
		env        map[string]string
		want       []string
	}{
		{"UnknownKind", `
[[alert]]
name = "a"
kind = "stuck"`, nil, []string{`alert "a"`, "kind", `"stuck"`, "stuck_keys"}},
		{"UnknownSetting", `
[[alert]]
name = "a"
kind = "stuck_keys"
threshhold = 3`, nil, []string{`alert "a"`, `unknown setting "threshhold"`}},
		{"UnknownSettingOfSecondAlert", `
[[alert]]
name = "a"
kind = "stuck_keys"
[[alert]]
name = "b"
kind = "stuck_keys"
treshold = 3`, nil, []string{`alert "b"`, `unknown setting "treshold"`}},
		{"UnknownChannelSetting", `
[[alert_channel]]
name = "chat"
type = "slack"
url = "https://chat.example/hooks/abc"
max_attempt = 3`, nil, []string{`alert_channel "chat"`, `unknown setting "max_attempt"`}},
		{"ZeroChannelMaxAttempts", `
[[alert_channel]]
name = "chat"
type = "slack"
url = "https://chat.example/hooks/abc"
max_attempts = 0`, nil, []string{`alert_channel "chat"`, "max_attempts", "at least 1, not 0"}},
		{"SettingOfAnotherKind", `
[[alert]]
name = "a"
kind = "disk_space"
min_free = "1GiB"
threshold = 3`, nil, []string{`alert "a"`, "threshold", "does not apply to kind disk_space"}},
		{"BareDuration", `
[[alert]]
name = "a"
kind = "signature_failures"
window = 300`, nil, []string{`alert "a"`, "window", "bare number"}},
		{"ClearForNotPositive", `
[[alert]]
name = "a"
kind = "database_not_ready"
clear_for = "0s"`, nil, []string{`alert "a"`, "clear_for", "must be positive"}},
		{"ClearForTooLong", `
[[alert]]
name = "a"
kind = "database_not_ready"
clear_for = "48h"`, nil, []string{`alert "a"`, "clear_for", "longer than 24h"}},
		{"BadSize", `
[[alert]]
name = "a"
kind = "disk_space"
min_free = "lots"`, nil, []string{`alert "a"`, "min_free", `"lots"`}},
		{"NoMinFree", `
[[alert]]
name = "a"
kind = "disk_space"`, nil, []string{`alert "a"`, "min_free", "required"}},
		{"UnknownSource", `
[[alert]]
name = "a"
kind = "downstream_failing"
source = "pms"`, nil, []string{`alert "a"`, "source", `"pms"`}},
		{"UnknownChannel", `
[[alert]]
name = "a"
kind = "database_not_ready"
channels = ["ops"]`, nil, []string{`alert "a"`, "channels", `"ops"`, "no [[alert_channel]]"}},
		{"DuplicateRule", `
[[alert]]
name = "a"
kind = "database_not_ready"
[[alert]]
name = "a"
kind = "clock_skew"`, nil, []string{`alert "a"`, "used by another alert"}},
		{"RuleNameWithNUL", `
[[alert]]
name = "db\u0000down"
kind = "database_not_ready"`, nil, []string{`alert "db\x00down"`, "name", "control character"}},
		{"ChannelNameWithNUL", `
[[alert_channel]]
name = "spare\u0000"
type = "slack"
url = "https://chat.example/hooks/abc"`, nil, []string{`alert_channel "spare\x00"`, "name", "control character"}},
		{"UnknownChannelType", `
[[alert_channel]]
name = "ops"
type = "pager"`, nil, []string{`alert_channel "ops"`, "type", `"pager"`}},
		{"WebhookWithoutSecret", `
[[alert_channel]]
name = "ops"
type = "webhook"
url = "https://hooks.example/alerts"`, nil, []string{`alert_channel "ops"`, "secret", "signs"}},
		{"SecretEnvUnset", `
[[alert_channel]]
name = "ops"
type = "webhook"
url = "https://hooks.example/alerts"
secret_env = "OPS_HOOK_SECRET"`, nil, []string{`alert_channel "ops"`, "secret_env", "OPS_HOOK_SECRET"}},
		{"EmailWithoutTo", `
[[alert_channel]]
name = "mail"
type = "email"
smtp_addr = "smtp.example.com:587"
from = "alerts@example.com"`, nil, []string{`alert_channel "mail"`, "to", "required"}},
		{"DuplicateChannel", `
[[alert_channel]]
name = "chat"
type = "slack"
url = "https://chat.example/hooks/abc"
[[alert_channel]]
name = "chat"
type = "slack"
url = "https://chat.example/hooks/def"`, nil, []string{`alert_channel "chat"`, "used by another channel"}},
		{"TimeoutOutlastsTheLease", `
[[alert_channel]]
name = "chat"
type = "slack"
url = "https://chat.example/hooks/abc"
timeout = "10m"`, nil, []string{`alert_channel "chat"`, "timeout", "4m0s", "send it again"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { serveRefuses(t, src+tc.toml, tc.env, tc.want) })
	}
}

// serveRefuses runs serve on config and wants it refused before it starts, in one line
// that names each of want.
func serveRefuses(t *testing.T, config string, env map[string]string, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, err := runInContext(t, ctx, config, env, "", "serve", "--addr", "127.0.0.1:0")
	if err == nil || ctx.Err() != nil {
		t.Fatalf("serve started (%v)", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not name %q", msg, w)
		}
	}
}

// TestConfig_AlertSecretsNeverInErrors: a bad webhook secret or slack URL is refused
// without being quoted.
func TestConfig_AlertSecretsNeverInErrors(t *testing.T) {
	for _, table := range []string{`
[[alert_channel]]
name = "ops"
type = "webhook"
url = "https://hooks.example/alerts"
secret = "whsec_not*base64*TOPSECRET"`, `
[[alert_channel]]
name = "chat"
type = "slack"
secret = "hooks.example/TOPSECRET"`, `
[[alert_channel]]
name = "ops"
type = "webhook"
url = "https:ops:TOPSECRET@hooks.example/alerts"
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`} {
		_, _, err := runIn(t, table, nil, "", "serve", "--addr", "127.0.0.1:0")
		if err == nil || strings.Contains(err.Error(), "TOPSECRET") {
			t.Fatalf("err = %v; want an error that does not show the secret", err)
		}
	}
}

// TestServe_Alerts: serve, configured with a downstream_failing rule and a slack and a
// webhook channel, tells each channel once when the downstream fails, and the alerts
// page shows the alert, the rule and the channels without their secrets.
func TestServe_Alerts(t *testing.T) {
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer downstream.Close()
	var mu sync.Mutex
	var slackTexts, hookBodies []string
	const slackPath = "/hooks/T0/B0/slackCREDENTIAL"
	receiverSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case slackPath:
			var p struct{ Text string }
			json.Unmarshal(b, &p)
			slackTexts = append(slackTexts, p.Text)
		case "/alerts":
			if r.Header.Get("Webhook-Signature") == "" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			hookBodies = append(hookBodies, string(b))
		}
	}))
	defer receiverSrv.Close()
	const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	dir := t.TempDir()
	toml := fmt.Sprintf(`
[[source]]
name = "ota"
signature = "none"
key_fields = ["/id"]
forward_url = %q
max_backoff = "10ms"

[[alert]]
name = "downstream"
kind = "downstream_failing"
times = 3
channels = ["chat", "ops"]

[[alert_channel]]
name = "chat"
type = "slack"
secret_env = "CHAT_URL"

[[alert_channel]]
name = "ops"
type = "webhook"
url = %q
secret_env = "OPS_SECRET"
`, downstream.URL, receiverSrv.URL+"/alerts")
	path := filepath.Join(dir, "hookdedup.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(name string) string {
		return map[string]string{"CHAT_URL": receiverSrv.URL + slackPath, "OPS_SECRET": hookSecret}[name]
	}
	cfg, err := loadConfig(path, true, getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Database = filepath.Join(dir, "hookdedup.db")
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := openProgram(ctx, cfg, env{getenv: getenv, stdout: &stdout, stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	storagetest.CreateUser(t, p.db, "root", storage.RoleAdmin, "admin password")
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	resp, err := http.Post(p.public.url()+"/webhooks/ota", "application/json", bytes.NewReader([]byte(`{"id":"bk-1"}`)))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %v %v", resp, err)
	}
	resp.Body.Close()
	storagetest.Eventually(t, 60*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(slackTexts) != 1 || len(hookBodies) != 1 {
			return fmt.Errorf("slack got %d, webhook %d", len(slackTexts), len(hookBodies))
		}
		return nil
	})
	mu.Lock()
	if !strings.Contains(slackTexts[0], "alert opened: downstream on ota") || !strings.Contains(hookBodies[0], `"type":"alert.opened"`) {
		t.Errorf("slack %q, webhook %q", slackTexts[0], hookBodies[0])
	}
	mu.Unlock()

	b := signIn(t, p.public.url())
	code, page := b.do(http.MethodGet, "/alerts", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /alerts: %d", code)
	}
	for _, want := range []string{"downstream", "ota", "The last 3 attempts", "chat", "slack", "webhook", receiverSrv.URL + "/alerts"} {
		if !strings.Contains(page, want) {
			t.Errorf("alerts page lacks %q", want)
		}
	}
	for _, secret := range []string{"slackCREDENTIAL", hookSecret} {
		if strings.Contains(page, secret) {
			t.Errorf("alerts page shows a secret (%q)", secret)
		}
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("log shows a secret (%q):\n%s", secret, stderr.String())
		}
	}
	// Each channel's notification is counted where the other series are watched.
	rec := httptest.NewRecorder()
	p.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics := rec.Body.String()
	for _, want := range []string{`hookdedup_alert_notifications_total{channel="chat",result="sent"} 1`,
		`hookdedup_alert_notifications_total{channel="ops",result="sent"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(slackTexts) != 1 || len(hookBodies) != 1 {
		t.Errorf("slack got %d, webhook %d: want one each while the outage lasts", len(slackTexts), len(hookBodies))
	}
}

// TestConfig_DiskSpaceNeedsAFile: a disk_space rule on a PostgreSQL database, which has
// no file on this machine, could never fire; it is refused at start, naming why.
func TestConfig_DiskSpaceNeedsAFile(t *testing.T) {
	c := config{Database: "postgres://hookdedup@127.0.0.1:5432/hookdedup",
		Alerts: []alertConfig{{Name: "disk", Kind: "disk_space", MinFree: "1GiB"}}}
	_, _, err := c.alerting(func(string) string { return "" }, nil)
	if err == nil || !strings.Contains(err.Error(), `alert "disk"`) || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("disk_space on PostgreSQL: %v; want a refusal naming the rule and why", err)
	}
	c.Database = "hookdedup.db"
	if _, _, err := c.alerting(func(string) string { return "" }, nil); err != nil {
		t.Fatalf("disk_space on SQLite: %v", err)
	}
}
