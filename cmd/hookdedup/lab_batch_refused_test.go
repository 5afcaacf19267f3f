package main

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsole_LabBatchRefusedWhole: a request one of whose items has no key is refused
// whole by intake (422, naming the item), and none of its items is claimed. The lab
// says so of the request, naming the item as intake does, and says of no item that it
// would be accepted.
func TestConsole_LabBatchRefusedWhole(t *testing.T) {
	mews := sourceConfig{Name: "mews", Provider: "mews", Secret: secrets{"mews-token-0123456789abcdef"}}
	srv, _, _ := consoleSite(t, mews)
	body := `{"EnterpriseId":"851df8c8-90f2-4c4a-8e01-a4fc46b25178","Events":[` +
		`{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"bfc7d1b8-8f5c-4a91-9a0f-ac870003e7a1"}},` +
		`{"Other":1},` +
		`{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"0c5d2f3e-1a2b-4c3d-9e8f-ac870003e7a2"}}]}`

	b := signIn(t, srv.URL)
	code, page := b.do(http.MethodPost, "/lab", url.Values{"source": {"mews"}, "payload": {body}})
	page = html.UnescapeString(page)
	if code != http.StatusOK {
		t.Fatalf("lab: %d", code)
	}

	resp, err := http.Post(srv.URL+"/webhooks/mews?token=mews-token-0123456789abcdef", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(answer), "item 1: no idempotency key") {
		t.Fatalf("intake: %d %s; the premise (refused whole for item 1) does not hold", resp.StatusCode, answer)
	}

	refused := strings.Split(page, `data-testid="lab-refused"`)
	if len(refused) != 2 || !strings.Contains(refused[1], "item 1: no idempotency key") {
		t.Errorf("the lab does not say that intake refuses the request for its item 1:\n%s", page)
	}
	if strings.Contains(page, "would be accepted") {
		t.Errorf("the lab says an item of a request that intake refuses whole would be accepted:\n%s", page)
	}
}
