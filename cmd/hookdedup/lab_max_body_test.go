package main

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsole_LabMaxBody: a payload over max_body is refused by intake (413) before it
// is read, and no key of it is claimed. The key lab says so, as `hookdedup key` does,
// instead of giving it a key that a delivery now would claim.
func TestConsole_LabMaxBody(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxBody = 256
	cfg.Sources = []sourceConfig{{Name: "pms", Signature: "none", KeyFields: []string{"/booking_id"}}}
	srv, _, _ := consoleSiteWith(t, cfg)
	payload := `{"booking_id":"BK-1","note":"` + strings.Repeat("x", 300) + `"}`

	resp, err := http.Post(srv.URL+"/webhooks/pms", "application/json", strings.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("intake: %d %s; the premise (413) does not hold", resp.StatusCode, answer)
	}

	b := signIn(t, srv.URL)
	code, page := b.do(http.MethodPost, "/lab", url.Values{"source": {"pms"}, "payload": {payload}})
	page = html.UnescapeString(page)
	if code != http.StatusOK {
		t.Fatalf("lab: %d", code)
	}
	if !strings.Contains(page, "over max_body (256 bytes): intake would answer 413 and key nothing") {
		t.Errorf("the lab does not say that intake refuses the payload for its size:\n%s", page)
	}
	if strings.Contains(page, "would be accepted") || strings.Contains(page, `data-testid="derived-key"`) {
		t.Errorf("the lab keys a payload that intake refuses for its size:\n%s", page)
	}
}
