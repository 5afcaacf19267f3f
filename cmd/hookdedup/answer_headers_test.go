package main

import (
	"net/http"
	"testing"
)

// Every answer of intake is data for a program, never a page: it carries nosniff, so
// that a browser sent to a webhook URL does not guess HTML from what a sender wrote
// into it. /metrics, live counts of every source, is no-store besides: no cache on the
// way, nor a browser, keeps it.
func TestServe_MachineAnswerHeaders(t *testing.T) {
	s := runServeInProcess(t, `addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
`+openSource+`
[[source]]
name      = "adyen"
signature = "none"
event_id  = "/id"
answer    = "[accepted]"

[[source]]
name      = "batched"
signature = "none"
event_id  = "/id"
batch     = "/items"
`, nil)
	pub, con := s.p.public.url(), s.p.console.url()
	for _, c := range []struct{ method, url, body string }{
		{"POST", pub + "/webhooks/open", `{"id":"hdr-1"}`},
		{"POST", pub + "/webhooks/open", `{"id":"hdr-1"}`},
		{"POST", pub + "/webhooks/open", `not json`},
		{"POST", pub + "/webhooks/adyen", `{"id":"hdr-2"}`},
		{"POST", pub + "/webhooks/batched", `{"items":[{"id":"hdr-5"}]}`},
		{"GET", pub + "/webhooks/open", ""},
		{"POST", pub + "/webhooks/nosuch", `{"id":"hdr-3"}`},
		{"POST", pub + "/webhooks//open", `{"id":"hdr-4"}`},
		{"GET", pub + "/healthz", ""},
		{"GET", pub + "/readyz", ""},
		{"GET", pub + "/nothing", ""},
	} {
		resp, body := call(t, c.method, c.url, "", c.body)
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: %s %q, X-Content-Type-Options %q; want nosniff", c.method, c.url, resp.Status, body, got)
		}
	}
	resp, body := call(t, "GET", con+"/metrics", "", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("GET /metrics: %s, Cache-Control %q, X-Content-Type-Options %q (%.60q); want 200, no-store and nosniff",
			resp.Status, resp.Header.Get("Cache-Control"), resp.Header.Get("X-Content-Type-Options"), body)
	}
}
