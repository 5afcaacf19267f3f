package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestConsole_CookiePrefixesOverHTTPS: over HTTPS the session cookie is named with the
// __Host- prefix and the device cookie with __Secure-, which a browser takes only from a
// secure origin (and __Host- only for Path=/ without a Domain). Another host under the
// same domain, or anyone on the network in plain HTTP, can then set no cookie the
// console reads: a session cookie of the attacker's own, got by signing in to the same
// console over plain HTTP (or from a tunnel), is not honoured over HTTPS.
func TestConsole_CookiePrefixesOverHTTPS(t *testing.T) {
	e := newConsoleEnv(t)
	tlsSrv := httptest.NewTLSServer(e.handler)
	t.Cleanup(tlsSrv.Close)
	secure := func() *client {
		c := e.clientAt(t, tlsSrv.URL)
		c.http.Transport = tlsSrv.Client().Transport
		return c
	}
	login := url.Values{"username": {"viewer"}, "password": {consolePassword}}
	code, _, h := secure().do(http.MethodPost, "/login", login)
	if code != http.StatusSeeOther {
		t.Fatalf("sign-in over HTTPS: %d", code)
	}
	set := map[string]string{}
	for _, ck := range h.Values("Set-Cookie") {
		name, _, _ := strings.Cut(ck, "=")
		set[name] = ck
	}
	for name, wants := range map[string][]string{
		"__Host-hookdedup_session":  {"Secure", "HttpOnly", "SameSite=Lax", "Path=/;"},
		"__Secure-hookdedup_device": {"Secure", "HttpOnly", "SameSite=Strict", "Path=/login;"},
	} {
		ck, ok := set[name]
		if !ok {
			t.Errorf("no cookie %s over HTTPS; set: %q", name, h.Values("Set-Cookie"))
			continue
		}
		for _, want := range wants {
			if !strings.Contains(ck+";", want) {
				t.Errorf("cookie %s %q lacks %s", name, ck, want)
			}
		}
		if strings.Contains(strings.ToLower(ck), "domain=") {
			t.Errorf("cookie %s %q names a domain", name, ck)
		}
	}

	// A valid session cookie as plain HTTP names it, planted over HTTPS, signs no one in.
	plain := e.client(t).login("viewer")
	u, _ := url.Parse(e.srv.URL)
	var planted *http.Cookie
	for _, ck := range plain.http.Jar.Cookies(u) {
		if ck.Name == "hookdedup_session" {
			planted = ck
		}
	}
	if planted == nil {
		t.Fatal("no session cookie over plain HTTP")
	}
	req, _ := http.NewRequest(http.MethodGet, tlsSrv.URL+"/", nil)
	req.AddCookie(planted)
	c := tlsSrv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Errorf("a session cookie without the __Host- prefix over HTTPS: %d %s, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
}
