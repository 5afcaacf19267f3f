package web_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/web"
)

// TestConsole_HostOnPrivateAddress: a console over plain HTTP on a VPN's or a LAN's
// address is open to DNS rebinding as one on loopback is: a page the user opens points
// its own name at the console's address, and its requests, with its name in Host, come
// from the user's machine as same-origin requests. They are refused, a sign-in
// included. Addresses, localhost, names no public site can have, and the names in
// console_names are served; so is any name from a client on a public address (such a
// page could reach the console as directly as its site can) and on a public address.
func TestConsole_HostOnPrivateAddress(t *testing.T) {
	e := newConsoleEnv(t, func(c *web.Config) { c.ConsoleNames = []string{"Console.Corp.Example.com."} })
	// at serves the console as if the connection came from peer to local.
	at := func(local, peer string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			addr, _ := net.ResolveTCPAddr("tcp", local)
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
			r.RemoteAddr = peer
			e.handler.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	signIn := func(base, host string) int {
		t.Helper()
		form := url.Values{"username": {"admin"}, "password": {consolePassword}}
		req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	vpn := at("10.8.0.1:8081", "10.8.0.2:50000")
	for _, host := range []string{"attacker.example:8081", "attacker.example", "10.8.0.1.nip.io", "corp.example.com", "console.corp.example.com.evil.example"} {
		if code := signIn(vpn, host); code != http.StatusMisdirectedRequest {
			t.Errorf("a sign-in sent as %s to the console on a VPN address: %d, want 421", host, code)
		}
	}
	for _, host := range []string{"10.8.0.1:8081", "[fd00::1]:8081", "localhost:8081", "hookdedup:8081", "box.local", "hookdedup.lan.",
		"ops.home.arpa", "hookdedup.internal", "console.corp.example.com", "CONSOLE.corp.example.com.:8081"} {
		if code := signIn(vpn, host); code != http.StatusSeeOther {
			t.Errorf("the right password sent as %s to the console on a VPN address: %d, want 303", host, code)
		}
	}
	for _, c := range []struct{ name, base string }{
		{"Tailscale", at("100.101.102.103:8081", "100.64.0.7:50000")},
		{"LinkLocal", at("[fe80::1]:8081", "[fe80::2]:50000")},
		{"LAN", at("192.168.1.10:8081", "192.168.1.20:50000")},
	} {
		if code := signIn(c.base, "attacker.example"); code != http.StatusMisdirectedRequest {
			t.Errorf("%s: a sign-in sent as attacker.example: %d, want 421", c.name, code)
		}
	}
	if code := signIn(at("10.0.0.5:8080", "203.0.113.9:50000"), "hooks.example.com"); code != http.StatusSeeOther {
		t.Errorf("from a public client to a private address (a cloud VM's, behind its public one): %d, want 303", code)
	}
	if code := signIn(at("203.0.113.5:8080", "192.168.1.20:50000"), "hooks.example.com"); code != http.StatusSeeOther {
		t.Errorf("to a public address: %d, want 303", code)
	}
}
