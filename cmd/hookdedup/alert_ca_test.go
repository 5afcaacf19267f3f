package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage"
)

// TestConfig_AlertChannelCAFile: a webhook and a slack [[alert_channel]] take ca_file, and
// each so configured delivers to an endpoint whose certificate its CA issued, which no
// system trusts (an internal receiver, a self-hosted Mattermost). Only email channels
// took it: the file was refused for the others.
func TestConfig_AlertChannelCAFile(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	caFile := filepath.Join(dir, "ops-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := ca.issue(t, "localhost")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()

	path := filepath.Join(dir, "hookdedup.toml")
	toml := fmt.Sprintf(`
[[alert_channel]]
name = "ops-hook"
type = "webhook"
url = %q
secret_env = "OPS_HOOK_SECRET"
ca_file = %q

[[alert_channel]]
name = "ops-chat"
type = "slack"
secret_env = "OPS_CHAT_WEBHOOK_URL"
ca_file = %q
`, srv.URL+"/alerts", caFile, caFile)
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPS_HOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "OPS_CHAT_WEBHOOK_URL": srv.URL + "/hooks/T0/B0/secret"}
	getenv := func(k string) string { return env[k] }
	cfg, err := loadConfig(path, true, getenv)
	if err != nil {
		t.Fatal(err)
	}
	_, channels, err := cfg.alerting(getenv, nil)
	if err != nil {
		t.Fatalf("webhook and slack channels with ca_file: %v; want them taken", err)
	}
	for _, c := range channels {
		err := c.Send(context.Background(), alert.Message{ID: "x", Event: storage.AlertOpened, At: time.Now(),
			Alert: storage.Alert{ID: 1, Rule: "pms-down", Kind: "downstream_failing"}})
		if err != nil {
			t.Errorf("channel %s: Send = %v; want the endpoint under ca_file's CA reached", c.Name(), err)
		}
	}
	if n := got.Load(); n != 2 {
		t.Errorf("endpoint got %d notifications, want 2", n)
	}
}

// TestConfig_AlertChannelCAFileRefused: a webhook or slack channel's ca_file that does
// not exist, or holds no PEM certificate, stops serve with one line naming the channel
// and the file, as does one beside an http:// url, where it could have no effect.
func TestConfig_AlertChannelCAFileRefused(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	notPEM := filepath.Join(dir, "ca.der")
	if err := os.WriteFile(notPEM, newTestCA(t).cert.Raw, 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: newTestCA(t).cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	const src = `
[[source]]
name = "ota"
signature = "none"
key_fields = ["/id"]
`
	channel := func(typ, url, caFile string) string {
		secret := ""
		if typ == "webhook" {
			secret = "\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\""
		}
		return fmt.Sprintf("\n[[alert_channel]]\nname = \"ops\"\ntype = %q\nurl = %q\nca_file = %q%s\n", typ, url, caFile, secret)
	}
	tests := []struct {
		name, toml string
		want       []string
	}{
		{"WebhookMissing", channel("webhook", "https://hooks.example/alerts", missing), []string{`alert_channel "ops"`, "ca_file", missing}},
		{"SlackMissing", channel("slack", "https://chat.example/hooks/abc", missing), []string{`alert_channel "ops"`, "ca_file", missing}},
		{"WebhookNotPEM", channel("webhook", "https://hooks.example/alerts", notPEM), []string{`alert_channel "ops"`, "ca_file", notPEM, "no PEM certificate"}},
		{"SlackNotPEM", channel("slack", "https://chat.example/hooks/abc", notPEM), []string{`alert_channel "ops"`, "ca_file", notPEM, "no PEM certificate"}},
		{"WebhookPlainHTTP", channel("webhook", "http://hooks.example/alerts", good), []string{`alert_channel "ops"`, "ca_file", "http://", "no effect"}},
		{"SlackPlainHTTP", channel("slack", "http://chat.example/hooks/abc", good), []string{`alert_channel "ops"`, "ca_file", "http://", "no effect"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { serveRefuses(t, src+tc.toml, nil, tc.want) })
	}
}
