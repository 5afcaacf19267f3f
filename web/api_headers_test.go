package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAPI_SecurityHeaders: every answer of the JSON API, a listing, an error, a refusal
// for want of a token, carries the headers the console's pages do against a browser
// that reads it as something else (nosniff), keeps it (no-store: it holds deliveries'
// bodies and headers, often personal data), frames it or follows a link out of it, and
// over HTTPS the same Strict-Transport-Security, since the API and the console share a
// host name and a browser that reached one in the clear would do so for the other.
func TestAPI_SecurityHeaders(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "k1", `{"booking_id":"BK-1"}`, false)
	tlsSrv := httptest.NewUnstartedServer(e.srv.Config.Handler)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	want := map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-store",
		"X-Frame-Options":        "DENY",
		"Referrer-Policy":        "no-referrer",
	}
	for _, srv := range []*httptest.Server{e.srv, tlsSrv} {
		https := srv == tlsSrv
		for _, c := range []struct {
			role, method, path string
			code               int
		}{
			{"viewer", http.MethodGet, "/api/v1/deliveries", http.StatusOK},
			{"viewer", http.MethodGet, "/api/v1/deliveries/1", http.StatusOK},
			{"viewer", http.MethodGet, "/api/v1/deliveries/999", http.StatusNotFound},
			{"viewer", http.MethodGet, "/api/v1/nothing", http.StatusNotFound},
			{"viewer", http.MethodPost, "/api/v1/release", http.StatusForbidden},
			{"", http.MethodGet, "/api/v1/keys", http.StatusUnauthorized},
		} {
			req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
			if c.role != "" {
				req.Header.Set("Authorization", "Bearer "+e.tokens[c.role])
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			what := c.method + " " + c.path
			if https {
				what += " over HTTPS"
			}
			if resp.StatusCode != c.code {
				t.Errorf("%s = %d, want %d", what, resp.StatusCode, c.code)
			}
			for name, v := range want {
				if got := resp.Header.Get(name); got != v {
					t.Errorf("%s: %s %q, want %q", what, name, got, v)
				}
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s: Content-Security-Policy %q, want default-src 'none' and frame-ancestors 'none'", what, csp)
			}
			hsts := resp.Header.Get("Strict-Transport-Security")
			if https && hsts != "max-age=31536000" {
				t.Errorf("%s: Strict-Transport-Security %q, want max-age=31536000", what, hsts)
			}
			if !https && hsts != "" {
				t.Errorf("%s: Strict-Transport-Security %q over plain HTTP, want none", what, hsts)
			}
		}
	}
}
