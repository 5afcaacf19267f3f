package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// payments adds a source "pay" whose amounts carry a currency.
func payments(cfg *web.Config) {
	cfg.Sources = append(cfg.Sources, web.Source{Name: "pay", Scheme: "stripe", Timestamped: true, Integrity: true,
		EventID: "/id", TTL: 7 * 24 * time.Hour, AmountField: []string{"/data/object/amount"}, CurrencyField: "/data/object/currency"})
}

// The money duplicates would have moved is summed per currency, never across them:
// refunds in euros, dollars, yen and dinars, each redelivered, against a hand count.
func TestConsole_MoneyPerCurrency(t *testing.T) {
	e := newConsoleEnv(t, payments)
	ctx := context.Background()
	// Each event once, then duplicates: 3 × EUR 182.50, 1 × USD 40.00, 2 × JPY 18,000,
	// 1 × KWD 1.250 delivered twice more or once more.
	events := []struct {
		key, amount, currency string
		redeliveries          int
	}{
		{"evt_eur_1", "182.50", "EUR", 2},
		{"evt_eur_2", "182.50", "EUR", 1},
		{"evt_usd", "40.00", "USD", 1},
		{"evt_jpy", "18000", "JPY", 2},
		{"evt_kwd", "1.250", "KWD", 1},
	}
	for _, ev := range events {
		for range 1 + ev.redeliveries {
			d := &storage.Delivery{Source: "pay", Status: 200, Key: ev.key, KeyMethod: "event_id", PayloadHash: ev.key,
				EventStatus: "charge.refunded", Amount: ev.amount, Currency: ev.currency, ContentType: "application/json",
				Body: []byte(`{"id":"` + ev.key + `"}`)}
			if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Counted by hand: duplicates only.
	//   EUR 182.50 × (2 + 1) = 547.50
	//   USD  40.00 × 1       =  40.00
	//   JPY 18,000 × 2       = 36,000
	//   KWD  1.250 × 1       =   1.250
	// and the console env's own duplicate refund of 190.00 in no known currency.
	want := "EUR 547.50 · JPY 36,000 · KWD 1.250 · USD 40.00 · — 190.00"

	for _, rolled := range []bool{false, true} {
		if rolled {
			if _, err := e.db.RollupStats(ctx, 1000); err != nil {
				t.Fatal(err)
			}
		}
		code, body := e.as(t, "viewer").get("/")
		if code != http.StatusOK {
			t.Fatalf("GET / = %d", code)
		}
		page := parsePage(t, body)
		if got := page.testid("card-money").testid("money").text(); got != strings.ReplaceAll(want, " · ", " ") {
			t.Errorf("rolled up %v: money card %q, want %q", rolled, got, want)
		}
		card := page.testid("card-money").text()
		if !strings.Contains(card, want) || !strings.Contains(card, "8 duplicates with an amount") {
			t.Errorf("rolled up %v: money card %q, want %q and 8 duplicates with an amount", rolled, card, want)
		}
		// Per source: pay's own sums; ota's only amount has no currency.
		for _, row := range page.testid("source-stats").tag("tr").list {
			text := nodes{t, []*html.Node{row}}.text()
			switch {
			case strings.HasPrefix(text, "pay "):
				if !strings.Contains(text, "EUR 547.50 · JPY 36,000 · KWD 1.250 · USD 40.00") || strings.Contains(text, "—") {
					t.Errorf("rolled up %v: pay's row %q", rolled, text)
				}
			case strings.HasPrefix(text, "ota "):
				if !strings.Contains(text, "— 190.00") || strings.Contains(text, "EUR") {
					t.Errorf("rolled up %v: ota's row %q", rolled, text)
				}
			}
		}
	}

	// The refunds caught, listed with their currency.
	_, body := e.as(t, "viewer").get("/")
	parsePage(t, body).shows("JPY 18000", "KWD 1.250")
	// The events list, the CSV and the API say the currency too.
	_, list := e.as(t, "viewer").get("/events?" + url.Values{"source": {"pay"}}.Encode())
	parsePage(t, list).shows("EUR 182.50", "USD 40.00")
	_, csvBody := e.as(t, "viewer").get("/events.csv?source=pay")
	if !strings.Contains(csvBody, ",amount,currency,") || !strings.Contains(csvBody, ",182.50,EUR,") {
		t.Errorf("CSV without its currency column:\n%s", csvBody)
	}
}

// The money card sums only amounts that are plain decimal numbers, and says how many it
// left out, as the ledger does: a refund of "1.234,56" CHF (European style) is neither
// summed as the CHF 1.23 its text starts with nor dropped unseen.
func TestConsole_MoneyCardUnsummed(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	for range 2 {
		d := &storage.Delivery{Source: "ota", Key: "chf-refund", KeyMethod: "event_id", PayloadHash: "h", Property: "HTL-9",
			Amount: "1.234,56", Currency: "CHF", Status: 200}
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	_, body := e.as(t, "viewer").get("/")
	money := parsePage(t, body).testid("card-money").text()
	if strings.Contains(money, "CHF 1.23") || !strings.Contains(money, "CHF 0.00 +1 unsummed") {
		t.Errorf("money card %q: want the refund of \"1.234,56\" CHF counted as unsummed, not summed", money)
	}
}

// The dashboard's money caught is the ledger's to the minor unit: an over-precise
// amount (JPY 100.5) is counted as unsummed on both pages, never rounded into one, and
// a sum past 2^53 minor units keeps its cents.
func TestConsole_MoneyIsTheLedgers(t *testing.T) {
	e := newConsoleEnv(t, payments)
	ctx := context.Background()
	for _, ev := range []struct{ key, amount, currency string }{
		{"evt_jpy_over", "100.5", "JPY"}, {"evt_jpy", "1200", "JPY"},
		{"evt_big_1", "30000000000000000.01", "USD"}, {"evt_big_2", "30000000000000000.01", "USD"},
		{"evt_big_3", "30000000000000000.01", "USD"},
	} {
		for range 2 {
			d := &storage.Delivery{Source: "pay", Status: 200, Key: ev.key, KeyMethod: "event_id", PayloadHash: ev.key,
				EventStatus: "charge.refunded", Amount: ev.amount, Currency: ev.currency, ContentType: "application/json",
				Body: []byte(`{"id":"` + ev.key + `"}`)}
			if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, rolled := range []bool{false, true} {
		if rolled {
			if _, err := e.db.RollupStats(ctx, 1000); err != nil {
				t.Fatal(err)
			}
		}
		code, body := e.as(t, "viewer").get("/")
		if code != http.StatusOK {
			t.Fatalf("GET / = %d", code)
		}
		card := parsePage(t, body).testid("card-money").text()
		for _, want := range []string{"JPY 1,200 +1 unsummed", "USD 90,000,000,000,000,000.03"} {
			if !strings.Contains(card, want) {
				t.Errorf("rolled up %v: money card %q, want %q", rolled, card, want)
			}
		}
		l, err := e.db.Ledger(ctx, storage.LedgerFilter{Source: "pay"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.Totals {
			want := map[string]storage.Money{"JPY": {Count: 2, Minor: 1200, Unsummed: 1},
				"USD": {Count: 3, Minor: 9000000000000000003}}[r.Currency]
			if r.Caught != want {
				t.Errorf("ledger's money caught in %s: %+v, want %+v, as the dashboard shows", r.Currency, r.Caught, want)
			}
		}
	}
}
