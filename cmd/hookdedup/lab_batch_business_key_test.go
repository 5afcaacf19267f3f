package main

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsole_LabBatchItemsSharingABusinessKey: two items of one request under two
// keys with one business key (a sender that re-sends an event under a new id in the
// same batch) are judged by intake against each other: the second is a suspected
// duplicate of the first, or, with business_key_blocks, a duplicate. The lab says what
// intake then does with that very request.
func TestConsole_LabBatchItemsSharingABusinessKey(t *testing.T) {
	for _, blocks := range []bool{false, true} {
		t.Run(map[bool]string{false: "Flags", true: "Blocks"}[blocks], func(t *testing.T) {
			mews := sourceConfig{Name: "mews", Provider: "mews", Secret: secrets{"mews-token-0123456789abcdef"},
				BusinessKey: []string{"/Discriminator", "/Value/ReservationId"}, BusinessKeyBlocks: &blocks}
			srv, _, _ := consoleSite(t, mews)
			item := func(id string) string {
				return `{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"` + id + `","ReservationId":"R-1"}}`
			}
			body := `{"EnterpriseId":"851df8c8-90f2-4c4a-8e01-a4fc46b25178","IntegrationId":"c8bee838-7fb1-4f4e-8fac-ac870003e6b6",` +
				`"Events":[` + item("bfc7d1b8-8f5c-4a91-9a0f-ac870003e7a1") + `,` + item("0c5d2f3e-1a2b-4c3d-9e8f-ac870003e7a2") + `]}`

			b := signIn(t, srv.URL)
			code, page := b.do(http.MethodPost, "/lab", url.Values{"source": {"mews"}, "payload": {body}})
			page = html.UnescapeString(page)
			items := strings.Split(page, `data-testid="lab-item"`)
			if code != http.StatusOK || len(items) != 3 {
				t.Fatalf("lab on a batch of two items: %d, %d items", code, len(items)-1)
			}
			second := items[2]

			resp, err := http.Post(srv.URL+"/webhooks/mews?token=mews-token-0123456789abcdef", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var ans struct {
				Items []struct {
					Status string `json:"status"`
				} `json:"items"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || len(ans.Items) != 2 {
				t.Fatalf("intake: %d %v %+v", resp.StatusCode, err, ans)
			}
			if blocks {
				if ans.Items[1].Status != "duplicate" {
					t.Fatalf("intake answered the second item %q; the premise (blocked) does not hold", ans.Items[1].Status)
				}
				if !strings.Contains(second, "would be a duplicate") || strings.Contains(second, "would be accepted") {
					t.Errorf("the lab says of the second item, which intake blocks:\n%s", second)
				}
				return
			}
			if ans.Items[1].Status != "accepted" {
				t.Fatalf("intake answered the second item %q", ans.Items[1].Status)
			}
			if !strings.Contains(second, "suspected duplicate") {
				t.Errorf("the lab foresees no suspected duplicate for the second item, which intake flags:\n%s", second)
			}
		})
	}
}
