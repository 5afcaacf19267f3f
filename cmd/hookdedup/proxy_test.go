package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestEndToEnd_TrustedProxies runs serve with trusted_proxies and sends it what a reverse
// proxy would: the receiver stores the forwarded client address and the console's cookie
// follows the forwarded scheme when the peer is trusted, and both ignore the headers
// when it is not.
func TestEndToEnd_TrustedProxies(t *testing.T) {
	t.Parallel() // its own serve processes, files and ports
	for _, tc := range []struct {
		name, trusted, addr string
		secure              bool
	}{
		{"Trusted", "127.0.0.1/32", "203.0.113.9:0", true},
		{"Untrusted", "10.0.0.0/8", "127.0.0.1:", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(e2eConfig), 0o600); err != nil {
				t.Fatal(err)
			}
			s := startServe(t, dir, []string{"CM_SECRET=proxy-secret", "HOOKDEDUP_TRUSTED_PROXIES=" + tc.trusted})

			body := `{"property_id":"P-1","booking_id":"B-7","status":"cancelled"}`
			req, _ := http.NewRequest(http.MethodPost, s.url+"/webhooks/channel-manager", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Signature", hmacSignature("proxy-secret", body))
			req.Header.Set("X-Forwarded-For", "198.51.100.66, 203.0.113.9")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var a map[string]string
			json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			id, err := strconv.ParseInt(a["delivery"], 10, 64)
			if resp.StatusCode != http.StatusOK || err != nil {
				t.Fatalf("delivery: %d %v", resp.StatusCode, a)
			}

			form := url.Values{"username": {"admin"}, "password": {s.password}}
			req, _ = http.NewRequest(http.MethodPost, s.url+"/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-Proto", "https")
			resp, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			cookie := resp.Header.Get("Set-Cookie")
			if resp.StatusCode != http.StatusSeeOther || strings.Contains(cookie, "Secure") != tc.secure {
				t.Errorf("sign-in with X-Forwarded-Proto https: %d, cookie %q, want Secure %v", resp.StatusCode, cookie, tc.secure)
			}
			s.stop(t)

			db, err := sqlite.Open(filepath.Join(dir, "hookdedup.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			d, err := db.Delivery(context.Background(), id)
			if err != nil || !strings.HasPrefix(d.RemoteAddr, tc.addr) || (tc.addr == "127.0.0.1:" && strings.HasSuffix(d.RemoteAddr, ":0")) {
				t.Fatalf("stored sender %q, %v; want %s…", d.RemoteAddr, err, tc.addr)
			}
		})
	}
}
