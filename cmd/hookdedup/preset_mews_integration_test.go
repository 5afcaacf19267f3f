package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestPresets_MewsIntegrationWebhookTokenNotKept: Mews may send its Integration
// Webhooks to the URL of its General Webhooks. The mews source refuses one (it has no
// Events) and keeps its body for whoever looks into why, but not the property's
// Connector API access token that IntegrationCreated carries: that would give every
// console user the API's access to the property.
func TestPresets_MewsIntegrationWebhookTokenNotKept(t *testing.T) {
	_, sources, err := loadSources(t, "[[source]]\nname = \"mews\"\nprovider = \"mews\"\nsecret = \"mews-url-token-1\"\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	db, srv := presetServer(t, sources)
	// Mews' own example of an Integration Webhook.
	const token = "9E5E84E9974D4F169662AB2200F27CB1-00B343A0DDA725CACAC028E38E3EABF"
	body := `{"Action":"IntegrationCreated","Data":{"Enterprise":{"Id":"8865aa96-f62d-4f9b-a912-ab2100f60f42",` +
		`"Name":"Sample Chain Hotel 1"},"Service":{"Id":"9745ce3a-8dbb-4cc0-a550-55f9ff67b242","Name":"Accommodation"},` +
		`"Requestor":null,"AccessToken":"` + token + `","CreatedUtc":"2019-12-13T14:42:52Z","IsEnabled":true,` +
		`"Integration":{"Id":"9e5e84e9-974d-4f16-9662-ab2200f27cb1","Name":"WebhookTEST"}}}`
	resp, err := http.Post(srv.URL+"/webhooks/mews?token=mews-url-token-1", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("an Integration Webhook: %d, want 422", resp.StatusCode)
	}
	ctx := context.Background()
	page, err := db.Deliveries(ctx, storage.DeliveryFilter{Outcome: storage.Rejected, Limit: 1})
	if err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("rejected deliveries: %+v, %v", page, err)
	}
	d, err := db.Delivery(ctx, page.Deliveries[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(d.Body); strings.Contains(got, token) || !strings.Contains(got, `"AccessToken":"[redacted]"`) ||
		!strings.Contains(got, `"Name":"WebhookTEST"`) {
		t.Errorf("kept body %s; want it whole but for the access token, redacted", got)
	}
}
