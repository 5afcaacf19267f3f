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
	"github.com/hookdedup/hookdedup/web"
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
	var noneRow, noneCurrency int
	totals := map[string]bool{}
	for _, l := range followLedgerLinks(t, e.as(t, "viewer")) {
		if l.total {
			totals[l.currency] = true
			continue
		}
		if l.property == "" {
			noneRow++
		}
		if l.currency == "—" {
			noneCurrency++
		}
	}
	if noneRow < 3 || noneCurrency < 3 {
		t.Fatalf("links of rows of no property: %d, of no currency: %d; want the cells of each", noneRow, noneCurrency)
	}
	if len(totals) != 2 {
		t.Fatalf("links of the totals of %v; want EUR and none", totals)
	}
}

// ledgerLink is a count of the ledger page that links to its deliveries: in a row of
// property and currency (as the page shows them), or in the totals.
type ledgerLink struct {
	property, currency, href string
	total                    bool
}

// followLedgerLinks follows every count's link of the ledger page, rows and totals,
// fails the test where the events list it leads to lists other than as many deliveries
// as the count, and returns the links.
func followLedgerLinks(t *testing.T, c *client) []ledgerLink {
	t.Helper()
	return followLedgerLinksOf(t, c, "/ledger")
}

// followLedgerLinksOf is followLedgerLinks on the ledger at path, which has a filter.
func followLedgerLinksOf(t *testing.T, c *client, path string) []ledgerLink {
	t.Helper()
	code, p := c.page(path)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d", path, code)
	}
	var out []ledgerLink
	follow := func(where string, l ledgerLink, link nodes) {
		t.Helper()
		want := link.text()
		code, ev := c.page(l.href)
		if got := strconv.Itoa(ev.testid("event-link").len()); code != http.StatusOK || got != want {
			t.Errorf("%s: %s lists %s deliveries (%d); the cell counts %s", where, l.href, got, code, want)
		}
		out = append(out, l)
	}
	for _, row := range p.testid("ledger-row").list {
		r := nodes{t, []*html.Node{row}}
		cells := r.tag("td")
		if cells.len() < 4 {
			t.Fatalf("ledger row: %q", r.text())
		}
		property, currency := nodes{t, cells.list[2:3]}.text(), nodes{t, cells.list[3:4]}.text()
		links := r.testid("ledger-link")
		for i, href := range links.attrs("href") {
			follow("row "+r.text(), ledgerLink{property: property, currency: currency, href: href}, nodes{t, links.list[i : i+1]})
		}
	}
	for _, row := range p.testid("ledger-total").list {
		r := nodes{t, []*html.Node{row}}
		links := r.testid("ledger-link")
		for i, href := range links.attrs("href") {
			follow("total "+r.text(), ledgerLink{currency: r.tag("th").text(), href: href, total: true}, nodes{t, links.list[i : i+1]})
		}
	}
	return out
}

// TestAPI_LedgerLinksOfNone: the API's ledger rows link, per kind, to exactly the
// deliveries they count, the rows of no property and of no currency included.
func TestAPI_LedgerLinksOfNone(t *testing.T) {
	e := newAPIEnv(t)
	recordNoneLedger(t, e.db)
	rows, links := followAPILedgerLinks(t, e)
	if rows != 4 {
		t.Fatalf("%d ledger rows; want 4", rows)
	}
	var none int
	for _, l := range links {
		if l.property == nil || l.currency == "" {
			none++
		}
	}
	if none < 3 {
		t.Fatalf("%d links of rows of no property or currency; want at least 3", none)
	}
}

// apiLedgerLink is one of an API ledger row's links to its deliveries of a kind.
type apiLedgerLink struct {
	property, currency any // as the row has them (nil: none)
	kind, link         string
}

// followAPILedgerLinks follows every link of the API's ledger rows, fails the test
// where the deliveries it lists are other than as many as the row counts of its kind,
// and returns how many rows there are and the links.
func followAPILedgerLinks(t *testing.T, e *apiEnv) (int, []apiLedgerLink) {
	t.Helper()
	code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/ledger", "")
	rows, _ := out["rows"].([]any)
	if code != http.StatusOK {
		t.Fatalf("ledger = %d %v", code, out)
	}
	var seen []apiLedgerLink
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
			seen = append(seen, apiLedgerLink{property: row["property"], currency: row["currency"], kind: kind, link: link.(string)})
		}
	}
	return len(rows), seen
}

// recordAmountLedger stores, today, deliveries of source ota, property HTL-3, whose
// ledger cells count some deliveries with an amount and some without: duplicates with
// an amount (one of them no plain decimal, counted unsummed) beside duplicates without
// one (a currency but no amount, neither), a money mismatch without an amount, and open
// and confirmed suspects on deliveries with and without one. A link that selected a
// cell's deliveries by outcome, mismatch or flag alone would list more or fewer than
// the cell counts.
func recordAmountLedger(t *testing.T, db *sqlite.DB) {
	t.Helper()
	ctx := context.Background()
	rec := func(key, hash, amount, currency string) *storage.Delivery {
		t.Helper()
		d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: "event_id", PayloadHash: hash, Property: "HTL-3",
			Amount: amount, Currency: currency, Status: 200}
		if err := db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	paid := rec("paid", "h", "15.00", "EUR")
	rec("paid", "h", "15.00", "EUR")
	mm := rec("paid", "h2", "", "EUR")
	storagetest.SetMoneyMismatch(t, db, mm.ID)
	rec("text", "h", "12,50", "EUR")
	rec("text", "h", "12,50", "EUR")
	unpaid := rec("unpaid", "h", "", "EUR")
	rec("unpaid", "h", "", "EUR")
	rec("unpaid", "h", "", "EUR")
	rec("bare", "h", "7", "")
	rec("bare", "h", "7", "")
	bare := rec("bare-none", "h", "", "")
	rec("bare-none", "h", "", "")
	for _, s := range []storage.Suspect{
		{Kind: storage.SuspectBusinessKey, Delivery: paid.ID, Amount: "15.00", Currency: "EUR"},
		{Kind: storage.SuspectBusinessKey, Delivery: unpaid.ID, Currency: "EUR"},
		{Kind: storage.SuspectCorrelation, Delivery: unpaid.ID, Currency: "EUR"},
		{Kind: storage.SuspectLateDuplicate, Delivery: bare.ID, State: storage.SuspectConfirmed},
	} {
		s.Source, s.Property = "ota", "HTL-3"
		storagetest.AddSuspect(t, db, s)
	}
}

// TestConsole_LedgerLinksOfAmounts: every count of the ledger links to the events list
// of exactly the deliveries it counts where some of a kind carry an amount and some do
// not: caught to the duplicates that carried one (an unsummed amount included), a money
// mismatch and a suspect to theirs with an amount or without.
func TestConsole_LedgerLinksOfAmounts(t *testing.T) {
	e := newConsoleEnv(t)
	recordAmountLedger(t, e.db)
	c := e.as(t, "viewer")
	_, p := c.page("/ledger")
	eur := p.testid("ledger-totals").withAttr("data-currency", "EUR")
	eur.testid("caught").shows("2", "EUR 15.00", "+1 unsummed")
	eur.testid("money-mismatches").shows("1")
	var caught int
	for _, l := range followLedgerLinks(t, c) {
		if l.property == "HTL-3" && strings.Contains(l.href, "outcome=duplicate") {
			caught++
		}
	}
	if caught != 2 {
		t.Fatalf("%d links of money caught of HTL-3; want 2 (EUR and none)", caught)
	}
}

// TestAPI_LedgerLinksOfAmounts: the API's ledger rows link, per kind, to exactly the
// deliveries they count, where some of a kind carry an amount and some do not.
func TestAPI_LedgerLinksOfAmounts(t *testing.T) {
	e := newAPIEnv(t)
	recordAmountLedger(t, e.db)
	rows, links := followAPILedgerLinks(t, e)
	kinds := map[string]bool{}
	for _, l := range links {
		kinds[l.kind] = true
	}
	if rows != 2 || len(kinds) != 5 {
		t.Fatalf("%d rows, links of %v; want 2 rows and links of caught, money_mismatch, every open kind and confirmed", rows, kinds)
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

// TestEvents_AmountFilter: amount=any selects the deliveries that carry an amount, in
// the console, its CSV and the API alike; the events page shows the filter and offers
// no bulk action, which could not keep it; any other value is refused with the
// parameter named.
func TestEvents_AmountFilter(t *testing.T) {
	e := newConsoleEnv(t)
	recordAmountLedger(t, e.db)
	op := e.as(t, storage.RoleOperator)
	const withAmount = "/events?property=HTL-3&outcome=duplicate&amount=any"

	t.Run("Console", func(t *testing.T) {
		code, p := op.page(withAmount)
		if n := p.testid("event-link").len(); code != http.StatusOK || n != 3 {
			t.Fatalf("duplicates of HTL-3 with an amount: %d, %d rows; want 3", code, n)
		}
		if got := selectedOption(p.testid("filter-amount")); got != "with an amount" {
			t.Errorf("the amount filter shows %q; want with an amount", got)
		}
		if links := p.testid("bulk-all").attrs("href"); len(links) != 0 {
			t.Errorf("bulk link %v; want none", links)
		}
		_, accepted := op.page("/events?outcome=accepted&amount=any")
		if links := accepted.testid("bulk-all").attrs("href"); len(links) != 0 {
			t.Errorf("bulk link %v from accepted deliveries with an amount; want none (it would take keys without one)", links)
		}
		if why := accepted.testid("bulk-why-not").text(); !strings.Contains(why, "amount: any") {
			t.Errorf("no word why there is no bulk link: %q", why)
		}
		csvURL := p.testid("csv").attrs("href")
		if len(csvURL) != 1 || !strings.Contains(csvURL[0], "amount=any") {
			t.Fatalf("CSV link %v does not keep amount", csvURL)
		}
		_, body := op.get(csvURL[0])
		if recs, err := csv.NewReader(strings.NewReader(body)).ReadAll(); err != nil || len(recs) != 4 {
			t.Fatalf("CSV of duplicates with an amount: %q, %v; want a header and 3 rows", recs, err)
		}
		if _, p := op.page("/events?property=HTL-3&outcome=duplicate"); p.testid("event-link").len() != 7 {
			t.Errorf("duplicates of HTL-3: %d; want 7, with an amount or not", p.testid("event-link").len())
		}
	})

	t.Run("API", func(t *testing.T) {
		a := newAPIEnv(t)
		recordAmountLedger(t, a.db)
		for query, want := range map[string]int{
			"outcome=duplicate&amount=any":                 3,
			"outcome=duplicate&amount=any&currency=EUR":    2,
			"outcome=duplicate&amount=any&currency_none=1": 1,
			"amount=any":                6,
			"outcome=duplicate&amount=": 7,
		} {
			code, out := a.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?"+query, "")
			if got, _ := out["deliveries"].([]any); code != http.StatusOK || len(got) != want {
				t.Errorf("deliveries?%s = %d, %d deliveries; want %d", query, code, len(got), want)
			}
		}
	})

	t.Run("Refused", func(t *testing.T) {
		a := newAPIEnv(t)
		for _, v := range []string{"1", "true", "none", "15.00"} {
			q := url.Values{"amount": {v}}
			code, out := a.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?"+q.Encode(), "")
			if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "amount") {
				t.Errorf("API deliveries?%s = %d %v; want 400 naming amount", q.Encode(), code, out)
			}
			code, p := op.page("/events?" + q.Encode())
			if msg := p.withAttr("role", "alert").text(); code != http.StatusBadRequest || !strings.Contains(msg, "amount") {
				t.Errorf("/events?%s = %d %q; want 400 naming amount", q.Encode(), code, msg)
			}
			if code, body := op.get("/events.csv?" + q.Encode()); code != http.StatusBadRequest || !strings.Contains(body, "amount") {
				t.Errorf("/events.csv?%s = %d %q; want 400 naming amount", q.Encode(), code, body)
			}
		}
	})
}

// TestConsole_LedgerLinksAcrossFallBack: with the console in Europe/Berlin, UTC midnight
// on the day summer time ends falls in the hour that comes twice. Written as a wall
// clock time, a day's link named the later of the two instants: the day before listed
// an hour too many, the day itself one too few. Written with their offset, each lists
// what its cell counts; the form shows the time as its box takes it.
func TestConsole_LedgerLinksAcrossFallBack(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	e := newConsoleEnv(t, func(c *web.Config) { c.Location = berlin })
	ctx := context.Background()
	e.clock.Add(time.Date(2026, 10, 24, 23, 30, 0, 0, time.UTC).Sub(e.clock.Now()))
	rec := func(key string) {
		t.Helper()
		for range 2 {
			d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: "event_id", PayloadHash: "h", Property: "HTL-1",
				Amount: "10.00", Currency: "EUR", Status: 200}
			if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec("before-midnight") // 2026-10-24 23:30 UTC, 01:30 in Berlin (summer time)
	e.clock.Add(time.Hour)
	rec("after-midnight") // 2026-10-25 00:30 UTC, 02:30 in Berlin, the second time
	e.clock.Add(12 * time.Hour)
	c := e.as(t, "viewer")
	var days int
	for _, l := range followLedgerLinks(t, c) {
		if !l.total {
			days++
		}
	}
	if days < 2 {
		t.Fatalf("%d row links; want one for each day", days)
	}
	_, p := c.page("/events?from=" + url.QueryEscape("2026-10-25T02:00:00+01:00"))
	if got := p.named("from").attrs("value"); len(got) != 1 || got[0] != "2026-10-25T02:00" {
		t.Errorf("the from box shows %q, want 2026-10-25T02:00", got)
	}
}

// TestConsole_LedgerLinksAtTheEndsOfTime: a ledger from year 0 or to 9999-12-31, the
// widest a script or a user asks for, links only to pages that answer: its counts'
// links to the events list lists what the count counts, its CSV downloads. Its end, the
// start of year 10000, is no time RFC 3339 can write; its start, 2000-01-01 at UTC
// midnight, is west of Greenwich still the year before.
func TestConsole_LedgerLinksAtTheEndsOfTime(t *testing.T) {
	for _, zone := range []string{"UTC", "Europe/Berlin", "America/New_York"} {
		t.Run(strings.ReplaceAll(zone, "/", "_"), func(t *testing.T) {
			loc, err := time.LoadLocation(zone)
			if err != nil {
				t.Skip(err)
			}
			e := newConsoleEnv(t, func(c *web.Config) { c.Location = loc })
			recordAmountLedger(t, e.db)
			c := e.as(t, storage.RoleViewer)
			for _, q := range []string{"to=9999-12-31", "from=2000-01-01", "from=2000-01-01&to=9999-12-31"} {
				var totals int
				for _, l := range followLedgerLinksOf(t, c, "/ledger?"+q) {
					if l.total {
						totals++
					}
				}
				if totals == 0 {
					t.Errorf("/ledger?%s: no links of the totals", q)
				}
				_, p := c.page("/ledger?" + q)
				for _, href := range p.testid("ledger-csv").attrs("href") {
					if code, body := c.get(href); code != http.StatusOK {
						t.Errorf("/ledger?%s: its CSV %s = %d %q", q, href, code, body)
					}
				}
			}
		})
	}
}

// TestAPI_LedgerAtTheEndsOfTime: the API's ledger from 2000-01-01 to 9999-12-31 answers,
// naming the days it was asked for, and its rows' links answer too.
func TestAPI_LedgerAtTheEndsOfTime(t *testing.T) {
	e := newAPIEnv(t)
	recordAmountLedger(t, e.db)
	code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/ledger?from=2000-01-01&to=9999-12-31", "")
	if code != http.StatusOK || out["from"] != "2000-01-01" || out["to"] != "9999-12-31" {
		t.Fatalf("ledger = %d from %v to %v", code, out["from"], out["to"])
	}
	for _, x := range out["rows"].([]any) {
		for kind, link := range x.(map[string]any)["deliveries"].(map[string]any) {
			if code, _ := e.call(t, storage.RoleViewer, "GET", link.(string), ""); code != http.StatusOK {
				t.Errorf("%s: GET %s = %d", kind, link, code)
			}
		}
	}
}

// The ledger CSV's no_amount counts the row's deliveries at risk or confirmed that
// carried no amount, each once: a delivery with an open suspect and a confirmed one (a
// re-send confirmed a double by business key, still open as a suspected double refund)
// is one delivery.
func TestConsole_LedgerCSVCountsADeliveryOnce(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	d := &storage.Delivery{Source: "ota", Key: "one", KeyMethod: "event_id", PayloadHash: "h", Property: "HTL-7",
		Currency: "EUR", Status: 200}
	if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []storage.Suspect{
		{Kind: storage.SuspectBusinessKey, Delivery: d.ID, Currency: "EUR", State: storage.SuspectConfirmed},
		{Kind: storage.SuspectCorrelation, Delivery: d.ID, Currency: "EUR"},
	} {
		s.Source, s.Property = "ota", "HTL-7"
		storagetest.AddSuspect(t, e.db, s)
	}
	c := e.as(t, "viewer")
	_, body := c.get("/ledger.csv?property=HTL-7")
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) != 2 {
		t.Fatalf("ledger CSV %q, %v: want a header and one row", recs, err)
	}
	if got := recs[1][len(recs[1])-1]; got != "1" {
		t.Errorf("no_amount = %s for the one delivery without an amount (row %q)", got, recs[1])
	}
}
