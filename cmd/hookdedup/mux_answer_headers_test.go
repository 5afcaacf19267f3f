package main

import (
	"net/http"
	"testing"
)

// Every answer of every address carries nosniff, no framing, a content policy and a
// referrer policy, also those that net/http's ServeMux writes itself before any handler
// of the program's runs: the redirect of a path that is not in its clean form
// (//events, /./login, /events/../login) and of a subtree's root without its slash
// (/api/v1). A redirect answered to a GET is a small HTML page that quotes the path.
// The handlers' own values are kept: the console's pages keep their policy.
func TestServe_SecurityHeadersOnMuxAnswers(t *testing.T) {
	type req struct{ method, url string }
	check := func(t *testing.T, reqs []req) {
		t.Helper()
		for _, c := range reqs {
			resp, body := call(t, c.method, c.url, "", "")
			for name, want := range map[string]string{
				"X-Content-Type-Options":  "nosniff",
				"X-Frame-Options":         "DENY",
				"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
				"Referrer-Policy":         "no-referrer",
			} {
				if got := resp.Header.Get(name); got != want {
					t.Errorf("%s %s: %s (%.60q): %s %q; want %q", c.method, c.url, resp.Status, body, name, got, want)
				}
			}
		}
	}

	t.Run("console_addr", func(t *testing.T) {
		s := runServeInProcess(t, `addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
`+openSource, nil)
		pub, con := s.p.public.url(), s.p.console.url()
		check(t, []req{
			{"GET", pub + "//healthz"},
			{"GET", pub + "/nothing/../healthz"},
			{"HEAD", pub + "//readyz"},
			{"GET", con + "//events"},
			{"GET", con + "/./login"},
			{"GET", con + "/events/../login"},
			{"POST", con + "//login"},
			{"GET", con + "/api/v1"},
			{"GET", con + "//metrics"},
		})
		// What the handlers set stays theirs.
		resp, _ := call(t, "GET", con+"/login", "", "")
		if got := resp.Header.Get("Content-Security-Policy"); got != consoleCSPForTest {
			t.Errorf("GET /login: Content-Security-Policy %q; want the console's %q", got, consoleCSPForTest)
		}
		if got := resp.Header.Get("Referrer-Policy"); got != "same-origin" {
			t.Errorf("GET /login: Referrer-Policy %q; want same-origin", got)
		}
		resp, body := call(t, "POST", pub+"/webhooks/open", "", `{"id":"mux-1"}`)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("POST /webhooks/open: %s %q, nosniff %q", resp.Status, body, resp.Header.Get("X-Content-Type-Options"))
		}
	})

	t.Run("one address", func(t *testing.T) {
		s := runServeInProcess(t, `addr = "127.0.0.1:0"
`+openSource, nil)
		pub := s.p.public.url()
		check(t, []req{
			{"GET", pub + "//events"},
			{"GET", pub + "/./login"},
			{"GET", pub + "/static/../login"},
			{"GET", pub + "/api/v1"},
			{"GET", pub + "//healthz"},
		})
	})
}

// consoleCSPForTest is the policy of the console's pages, as the README gives it.
const consoleCSPForTest = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
