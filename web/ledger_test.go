package web_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/views/viewstest"
)

// recordNoneLedger stores, today, duplicates of source ota that the ledger counts in
// rows of no property and of no currency beside rows of a real property and currency,
// so that a link of a row of none that selected every property's or every currency's
// deliveries would list more than the row counts.
func recordNoneLedger(t *testing.T, db *sqlite.DB) {
	t.Helper()
	ctx := context.Background()
	rec := func(key, hash, property, amount, currency string) *storage.Delivery {
		t.Helper()
		d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: "event_id", PayloadHash: hash, Property: property,
			Amount: amount, Currency: currency, Status: 200}
		if err := db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, x := range []struct{ key, property, amount, currency string }{
		{"none-eur", "", "15.00", "EUR"},
		{"none-none", "", "7", ""},
		{"real-eur", "HTL-2", "20.00", "EUR"},
		{"real-none", "HTL-2", "9", ""},
	} {
		rec(x.key, "h", x.property, x.amount, x.currency)
		rec(x.key, "h", x.property, x.amount, x.currency)
	}
	mm := rec("none-eur", "h2", "", "16.00", "EUR")
	storagetest.SetMoneyMismatch(t, db, mm.ID)
	mm = rec("real-eur", "h2", "HTL-2", "21.00", "EUR")
	storagetest.SetMoneyMismatch(t, db, mm.ID)
}

// TestConsole_LedgerLinksOfNone: every count of the ledger, in its rows and its
// totals, links to the events list of exactly the deliveries it counts, the rows of no
// property (a blank cell) and of no currency ("—") included: not to every property's or every
// currency's deliveries.
func TestConsole_LedgerLinksOfNone(t *testing.T) {
	e := newConsoleEnv(t)
	recordNoneLedger(t, e.db)
	c := e.as(t, "viewer")
	_, p := c.page("/ledger")
	var noneRow, noneCurrency int
	for _, row := range p.testid("ledger-row").list {
		r := nodes{t, []*html.Node{row}}
		cells := r.tag("td")
		if cells.len() < 4 {
			t.Fatalf("ledger row: %q", r.text())
		}
		property, currency := nodes{t, cells.list[2:3]}.text(), nodes{t, cells.list[3:4]}.text()
		links := r.testid("ledger-link")
		for i, href := range links.attrs("href") {
			if property == "" {
				noneRow++
			}
			if currency == "—" {
				noneCurrency++
			}
			want := nodes{t, links.list[i : i+1]}.text()
			code, ev := c.page(href)
			if got := strconv.Itoa(ev.testid("event-link").len()); code != http.StatusOK || got != want {
				t.Errorf("row %q: %s lists %s deliveries (%d); the cell counts %s", r.text(), href, got, code, want)
			}
		}
	}
	if noneRow < 3 || noneCurrency < 3 {
		t.Fatalf("links of rows of no property: %d, of no currency: %d; want the cells of each", noneRow, noneCurrency)
	}
	totals := p.testid("ledger-total")
	if totals.len() != 2 {
		t.Fatalf("ledger totals: %q; want EUR and none", totals.text())
	}
	links := totals.testid("ledger-link")
	for i, href := range links.attrs("href") {
		want := nodes{t, links.list[i : i+1]}.text()
		if code, ev := c.page(href); code != http.StatusOK || strconv.Itoa(ev.testid("event-link").len()) != want {
			t.Errorf("total: %s lists %d deliveries (%d); the cell counts %s", href, ev.testid("event-link").len(), code, want)
		}
	}
}

// TestAPI_LedgerLinksOfNone: the API's ledger rows link, per kind, to exactly the
// deliveries they count, the rows of no property and of no currency included.
func TestAPI_LedgerLinksOfNone(t *testing.T) {
	e := newAPIEnv(t)
	recordNoneLedger(t, e.db)
	code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/ledger", "")
	rows, _ := out["rows"].([]any)
	if code != http.StatusOK || len(rows) != 4 {
		t.Fatalf("ledger = %d %v; want 4 rows", code, out)
	}
	var none int
	for _, x := range rows {
		row := x.(map[string]any)
		links, _ := row["deliveries"].(map[string]any)
		for kind, link := range links {
			want := row[kind].(map[string]any)["count"].(float64)
			code, list := e.call(t, storage.RoleViewer, "GET", link.(string), "")
			got, _ := list["deliveries"].([]any)
			if code != http.StatusOK || float64(len(got)) != want {
				t.Errorf("row %v/%v %s: GET %s = %d, %d deliveries; the row counts %v", row["property"], row["currency"], kind,
					link, code, len(got), want)
			}
			if row["property"] == nil || row["currency"] == "" {
				none++
			}
		}
	}
	if none < 3 {
		t.Fatalf("%d links of rows of no property or currency; want at least 3", none)
	}
}

// TestEvents_NoneFilters: property_none and currency_none select the deliveries without
// one, in the console, its CSV and the API alike; the events page shows the filter and
// offers no bulk action, which could not keep it; a value that is neither on nor off,
// or beside a property or currency, is refused with the parameter named.
func TestEvents_NoneFilters(t *testing.T) {
	e := newConsoleEnv(t)
	recordNoneLedger(t, e.db)
	op := e.as(t, storage.RoleOperator)

	t.Run("Console", func(t *testing.T) {
		code, p := op.page("/events?source=ota&outcome=duplicate&property_none=1")
		if n := p.testid("event-link").len(); code != http.StatusOK || n != 3 {
			t.Fatalf("duplicates without a property: %d, %d rows; want 3", code, n)
		}
		if got := selectedOption(p.testid("filter-property-none")); got != "none" {
			t.Errorf("the property filter shows %q; want none", got)
		}
		if p.named("property").len() != 0 {
			t.Errorf("a property box beside property: none")
		}
		if links := p.testid("bulk-all").attrs("href"); len(links) != 0 {
			t.Errorf("bulk link %v; want none", links)
		}
		if why := p.testid("bulk-why-not").text(); !strings.Contains(why, "property: none") {
			t.Errorf("no word why there is no bulk link: %q", why)
		}
		_, accepted := op.page("/events?outcome=accepted&property_none=1")
		if links := accepted.testid("bulk-all").attrs("href"); len(links) != 0 {
			t.Errorf("bulk link %v from accepted deliveries without a property; want none (it would take every property)", links)
		}
		csvURL := p.testid("csv").attrs("href")
		if len(csvURL) != 1 || !strings.Contains(csvURL[0], "property_none=1") {
			t.Fatalf("CSV link %v does not keep property_none", csvURL)
		}
		_, body := op.get(csvURL[0])
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil || len(recs) != 4 {
			t.Fatalf("CSV of duplicates without a property: %q, %v; want a header and 3 rows", recs, err)
		}
		for _, r := range recs[1:] {
			if r[7] != "" {
				t.Errorf("CSV row of property %q", r[7])
			}
		}
		_, p = op.page("/events?outcome=duplicate&currency_none=1&property=HTL-2")
		if got := p.testid("event-link").len(); got != 1 {
			t.Errorf("duplicates of HTL-2 without a currency: %d; want 1", got)
		}
		if got := selectedOption(p.testid("filter-currency-none")); got != "none" {
			t.Errorf("the currency filter shows %q; want none", got)
		}
	})

	t.Run("API", func(t *testing.T) {
		a := newAPIEnv(t)
		recordNoneLedger(t, a.db)
		for query, want := range map[string]int{
			"outcome=duplicate&property_none=1":                  3,
			"outcome=duplicate&property_none=true&currency=EUR":  2,
			"outcome=duplicate&currency_none=1":                  2,
			"outcome=duplicate&property_none=1&currency_none=1":  1,
			"outcome=duplicate&property_none=0":                  6,
			"outcome=duplicate&property_none=&property=HTL-2":    3,
			"outcome=duplicate&currency_none=false&currency=eur": 4,
		} {
			code, out := a.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?"+query, "")
			if got, _ := out["deliveries"].([]any); code != http.StatusOK || len(got) != want {
				t.Errorf("deliveries?%s = %d, %d deliveries; want %d", query, code, len(got), want)
			}
		}
	})

	t.Run("Refused", func(t *testing.T) {
		a := newAPIEnv(t)
		for _, q := range []url.Values{
			{"property_none": {"yes"}},
			{"currency_none": {"none"}},
			{"property_none": {"1"}, "property": {"HTL-2"}},
			{"currency_none": {"1"}, "currency": {"EUR"}},
		} {
			param := "property_none"
			if q.Has("currency_none") {
				param = "currency_none"
			}
			code, out := a.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?"+q.Encode(), "")
			if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, param) {
				t.Errorf("API deliveries?%s = %d %v; want 400 naming %s", q.Encode(), code, out, param)
			}
			code, p := op.page("/events?" + q.Encode())
			if msg := p.withAttr("role", "alert").text(); code != http.StatusBadRequest || !strings.Contains(msg, param) {
				t.Errorf("/events?%s = %d %q; want 400 naming %s", q.Encode(), code, msg, param)
			}
			if code, body := op.get("/events.csv?" + q.Encode()); code != http.StatusBadRequest || !strings.Contains(body, param) {
				t.Errorf("/events.csv?%s = %d %q; want 400 naming %s", q.Encode(), code, body, param)
			}
		}
	})
}

// selectedOption is the text of the options selected in the selection's selects.
func selectedOption(n nodes) string {
	return n.find(func(x *html.Node) bool {
		_, ok := viewstest.Attr(x, "selected")
		return x.Data == "option" && ok
	}).text()
}
