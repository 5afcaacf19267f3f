package web_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// The money card's link lists exactly the duplicates whose money the card counts: every
// duplicate that carried an amount, whatever its event's status (a Stripe refund's is
// its event type, not "cancelled"), and none without an amount.
func TestConsole_MoneyCardLinksTheDuplicatesItCounts(t *testing.T) {
	e := newConsoleEnv(t, payments)
	ctx := context.Background()
	for _, ev := range []struct{ key, status, amount, currency string }{
		{"evt_refund", "charge.refunded", "182.50", "EUR"},
		{"evt_refund_text", "refund.created", "12,50", "EUR"},
		{"evt_no_amount", "charge.refunded", "", ""},
	} {
		for range 2 {
			d := &storage.Delivery{Source: "pay", Status: 200, Key: ev.key, KeyMethod: "event_id", PayloadHash: ev.key,
				EventStatus: ev.status, Amount: ev.amount, Currency: ev.currency, ContentType: "application/json",
				Body: []byte(`{"id":"` + ev.key + `"}`)}
			if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, body := e.as(t, "viewer").get("/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	card := parsePage(t, body).testid("card-money")
	m := regexp.MustCompile(`(\d+) duplicates? with an amount`).FindStringSubmatch(card.text())
	if m == nil {
		t.Fatalf("money card %q: want how many duplicates with an amount it counts", card.text())
	}
	counted, _ := strconv.Atoi(m[1])
	hrefs := card.attrs("href")
	if len(hrefs) != 1 {
		t.Fatalf("money card links %v, want one link", hrefs)
	}
	code, list := e.as(t, "viewer").get(hrefs[0])
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d", hrefs[0], code)
	}
	rows := parsePage(t, list).testid("event-row")
	text := rows.text()
	if rows.len() != counted || !strings.Contains(text, "EUR 182.50") || !strings.Contains(text, "12,50") {
		t.Errorf("the money card counts %d duplicates; its link %s lists %d: %q", counted, hrefs[0], rows.len(), text)
	}
}
