package main

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/receiver/provider"
)

// TestConsole_LabBatchRepeatedKeyFlags: an item that repeats an earlier item's key in
// one request is that item's duplicate, and intake compares it with that item: a
// mismatch when its payload differs, a money mismatch when its amount does too. The lab
// says so. When the database holds the key already, each item is a duplicate of the
// database's first delivery, not of the request's first item, and the lab says that.
func TestConsole_LabBatchRepeatedKeyFlags(t *testing.T) {
	amount := provider.Places{"/Amount"}
	mews := sourceConfig{Name: "mews", Provider: "mews", Secret: secrets{"mews-token-0123456789abcdef"}, AmountField: &amount}
	srv, db, _ := consoleSite(t, mews)
	item := func(amount string) string {
		return `{"Discriminator":"ServiceOrderUpdated","Value":{"Id":"bfc7d1b8-8f5c-4a91-9a0f-ac870003e7a1"},"Amount":` + amount + `}`
	}
	body := `{"EnterpriseId":"851df8c8-90f2-4c4a-8e01-a4fc46b25178","IntegrationId":"c8bee838-7fb1-4f4e-8fac-ac870003e6b6",` +
		`"Events":[` + item("120.00") + `,` + item("99.00") + `]}`
	b := signIn(t, srv.URL)
	lab := func() string {
		t.Helper()
		code, page := b.do(http.MethodPost, "/lab", url.Values{"source": {"mews"}, "payload": {body}})
		items := strings.Split(html.UnescapeString(page), `data-testid="lab-item"`)
		if code != http.StatusOK || len(items) != 3 {
			t.Fatalf("lab on a batch of two items: %d, %d items", code, len(items)-1)
		}
		return items[2]
	}
	second := lab()

	resp, err := http.Post(srv.URL+"/webhooks/mews?token=mews-token-0123456789abcdef", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		Items []struct {
			Status, Delivery string
		} `json:"items"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if err != nil || len(ans.Items) != 2 || ans.Items[1].Status != "duplicate" {
		t.Fatalf("intake: %d %v %+v", resp.StatusCode, err, ans)
	}
	id, _ := strconv.ParseInt(ans.Items[1].Delivery, 10, 64)
	d, err := db.Delivery(context.Background(), id)
	if err != nil || !d.Mismatch || !d.MoneyMismatch {
		t.Fatalf("intake's second item: mismatch %v, money mismatch %v, %v; the premise does not hold", d.Mismatch, d.MoneyMismatch, err)
	}
	if !strings.Contains(second, "Item 0 of this request has the same key") || !strings.Contains(second, "money mismatch") {
		t.Errorf("the lab foresees no money mismatch for the second item, which intake flags one:\n%s", second)
	}

	// The key is held now: both items are duplicates of the delivery that holds it.
	second = lab()
	if strings.Contains(second, "claims it first") || !strings.Contains(second, "would be a duplicate") {
		t.Errorf("with the key held, the lab says of the second item:\n%s", second)
	}
}
