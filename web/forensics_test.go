package web_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// flagEnv is the console with the duplicate of its key flagged as a suspected
// duplicate of the first delivery, and marked a money mismatch, as detection at intake
// would have left them.
func flagEnv(t *testing.T) (*consoleEnv, storage.Suspect) {
	t.Helper()
	e := newConsoleEnv(t)
	storagetest.SetMoneyMismatch(t, e.db, e.dup.ID)
	s := storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: e.dup.ID,
		Other: e.first.ID, Source: "ota", Property: "HTL-1", Booking: "BK-42", Amount: "190.00", Currency: "EUR"})
	return e, s
}

func TestConsole_ReviewSuspect(t *testing.T) {
	e, s := flagEnv(t)
	ctx := context.Background()
	review := fmt.Sprintf("/suspects/%d/review", s.ID)
	page := fmt.Sprintf("/events/%d", e.dup.ID)
	state := func() storage.Suspect {
		t.Helper()
		x, err := e.db.Suspect(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	audits := func() []storage.AuditEntry {
		t.Helper()
		es, err := e.db.AuditLog(ctx, 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		var out []storage.AuditEntry
		for _, a := range es {
			if a.Action == "confirm double" || a.Action == "dismiss suspect" {
				out = append(out, a)
			}
		}
		return out
	}

	t.Run("ViewerSeesNoFormAndIsRefused", func(t *testing.T) {
		c := e.as(t, "viewer")
		_, p := c.page(page)
		p.testid("flags").shows("suspected duplicate", "open")
		if n := p.testid("review-form").len(); n != 0 {
			t.Fatalf("a viewer is shown %d review forms", n)
		}
		code, _, _ := c.post(review, url.Values{"state": {"confirmed"}, "reason": {"looks double"}, "return": {page}})
		if code != http.StatusForbidden {
			t.Fatalf("viewer review = %d, want 403", code)
		}
		if x := state(); x.State != storage.SuspectOpen || len(audits()) != 0 {
			t.Fatalf("after a viewer's review: %+v, audit %v", x, audits())
		}
	})

	t.Run("Refused", func(t *testing.T) {
		c := e.as(t, "operator")
		// No CSRF token: refused like every form of the console.
		code, _, _ := c.do(http.MethodPost, review, url.Values{"state": {"confirmed"}, "reason": {"x"}})
		if code != http.StatusForbidden {
			t.Fatalf("review without the CSRF token = %d, want 403", code)
		}
		c.get(page)
		if code, _, _ := c.post(review, url.Values{"state": {"open"}, "reason": {"x"}}); code != http.StatusBadRequest {
			t.Fatalf("review to open = %d, want 400", code)
		}
		if code, _, _ := c.post(fmt.Sprintf("/suspects/%d/review", s.ID+100), url.Values{"state": {"confirmed"}, "reason": {"x"}}); code != http.StatusNotFound {
			t.Fatalf("review of an unknown suspect = %d, want 404", code)
		}
		code, _, h := c.post(review, url.Values{"state": {"confirmed"}, "reason": {"  "}, "return": {page + "#flags"}})
		if code != http.StatusSeeOther || h.Get("Location") != page+"#flags" {
			t.Fatalf("review without a reason = %d %q, want 303 back", code, h.Get("Location"))
		}
		_, p := c.page(page)
		p.testid("flash").shows("Give a reason")
		if x := state(); x.State != storage.SuspectOpen || len(audits()) != 0 {
			t.Fatalf("after refused reviews: %+v, audit %v", x, audits())
		}
	})

	t.Run("OperatorConfirms", func(t *testing.T) {
		c := e.as(t, "operator")
		_, p := c.page(page)
		form := p.testid("review-form")
		if form.len() != 1 || form.attrs("action")[0] != review {
			t.Fatalf("review form: %d, actions %v", form.len(), form.attrs("action"))
		}
		code, _, h := c.post(review, url.Values{"state": {"confirmed"}, "reason": {"refunded twice, ticket 7"}, "return": {page + "#flags"}})
		if code != http.StatusSeeOther || h.Get("Location") != page+"#flags" {
			t.Fatalf("review = %d %q", code, h.Get("Location"))
		}
		_, p = c.page(page)
		p.testid("flash").shows("marked a confirmed double")
		p.testid("suspect-state").shows("confirmed")
		p.testid("suspect-reason").shows("refunded twice, ticket 7")
		if p.testid("review-form").len() != 0 {
			t.Fatal("a reviewed suspect still has its form")
		}
		x := state()
		if x.State != storage.SuspectConfirmed || x.ReviewedBy != "operator" || x.Reason != "refunded twice, ticket 7" {
			t.Fatalf("reviewed suspect = %+v", x)
		}
		as := audits()
		if len(as) != 1 || as[0].Actor != "operator" || as[0].Action != "confirm double" || as[0].PreviousState != "open" ||
			!strings.Contains(as[0].Reason, "refunded twice, ticket 7") {
			t.Fatalf("audit = %+v", as)
		}
		_, p = c.page("/audit")
		p.testid("audit").shows("confirm double", "refunded twice, ticket 7")
	})
}

func TestConsole_Flags(t *testing.T) {
	e, s := flagEnv(t)
	c := e.as(t, "viewer")

	t.Run("EventsList", func(t *testing.T) {
		_, p := c.page("/events")
		var flagged []string
		for _, row := range p.testid("event-row").list {
			r := nodes{t: t, list: []*html.Node{row}}
			if r.testid("flag").len() > 0 {
				flagged = append(flagged, r.testid("event-link").text())
			}
		}
		slices.Sort(flagged)
		if want := []string{fmt.Sprint(e.first.ID), fmt.Sprint(e.dup.ID)}; fmt.Sprint(flagged) != fmt.Sprint(want) {
			t.Fatalf("rows with a flag: %v, want %v (the flagged one and the one it doubles)", flagged, want)
		}
		if n := p.testid("money-mismatch").len(); n != 1 {
			t.Fatalf("%d money-mismatch badges, want 1", n)
		}
	})

	t.Run("Filters", func(t *testing.T) {
		for _, tc := range []struct {
			query string
			want  []int64
		}{
			{"mismatch=money", []int64{e.dup.ID}},
			{"flag=business_key", []int64{e.dup.ID}},
			{"flag=any&flag_state=open", []int64{e.dup.ID}},
			{"flag=late_duplicate", nil},
			{"flag=any&flag_state=confirmed", nil},
		} {
			code, p := c.page("/events?" + tc.query)
			got := p.testid("event-link").text()
			var want []string
			for _, id := range tc.want {
				want = append(want, fmt.Sprint(id))
			}
			if code != http.StatusOK || got != strings.Join(want, "") {
				t.Errorf("/events?%s = %d, rows %q, want %q", tc.query, code, got, strings.Join(want, ""))
			}
			// The filter survives in the form.
			if tc.query == "mismatch=money" && !strings.Contains(p.testid("filter-mismatch").find(selected).text(), "money") {
				t.Errorf("the mismatch filter shows %q", p.testid("filter-mismatch").find(selected).text())
			}
		}
		if code, _ := c.get("/events?flag=nonsense"); code != http.StatusBadRequest {
			t.Errorf("flag=nonsense = %d, want 400", code)
		}
	})

	t.Run("DeliveryPage", func(t *testing.T) {
		_, p := c.page(fmt.Sprintf("/events/%d", e.dup.ID))
		p.testid("flags").shows("suspected duplicate", "EUR 190.00")
		if links := p.testid("flag-other").attrs("href"); len(links) != 1 || links[0] != fmt.Sprintf("/events/%d", e.first.ID) {
			t.Fatalf("link to the other delivery: %v", links)
		}
		// The other side links back.
		_, p = c.page(fmt.Sprintf("/events/%d", e.first.ID))
		if links := p.testid("flag-other").attrs("href"); len(links) != 1 || links[0] != fmt.Sprintf("/events/%d", e.dup.ID) {
			t.Fatalf("link back from the first delivery: %v", links)
		}
	})

	t.Run("DiffMarksMoney", func(t *testing.T) {
		_, p := c.page(fmt.Sprintf("/events/%d", e.dup.ID))
		money := p.testid("diff").class("diff-money")
		if money.len() != 2 || !strings.Contains(money.text(), `"amount": 180.00`) || !strings.Contains(money.text(), `"amount": 190.00`) {
			t.Fatalf("money lines of the diff: %d %q", money.len(), money.text())
		}
	})

	t.Run("DiffLeavesOneAmountSpeltTwoWaysUnmarked", func(t *testing.T) {
		d := &storage.Delivery{Source: "ota", Key: e.first.Key, KeyMethod: "derived", PayloadHash: "h3", Property: "HTL-1",
			Booking: "BK-42", EventStatus: "cancelled", Amount: "180.0", ContentType: "application/json",
			Body: []byte(`{"booking_id":"BK-42","property_id":"HTL-1","status":"cancelled","refund":{"amount":180.0},"note":"resent"}`)}
		if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		_, p := c.page(fmt.Sprintf("/events/%d?with=%d", d.ID, e.first.ID))
		diff := p.testid("diff")
		if !strings.Contains(diff.text(), `"amount": 180.0`) || !strings.Contains(diff.text(), `"note"`) {
			t.Fatalf("the diff lacks the changed lines: %q", diff.text())
		}
		if money := diff.class("diff-money"); money.len() != 0 {
			t.Errorf("the diff marks %d lines as money: %q", money.len(), money.text())
		}
	})

	t.Run("CSV", func(t *testing.T) {
		_, body := c.get("/events.csv")
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		head := recs[0]
		col := func(name string) int { return slices.Index(head, name) }
		got := map[string]string{}
		for _, r := range recs[1:] {
			got[r[0]] = r[col("money_mismatch")] + "|" + r[col("flags")] + "|" + r[col("flagged_with")]
		}
		want := map[string]string{
			fmt.Sprint(e.first.ID): "false|business_key:open|" + fmt.Sprint(e.dup.ID),
			fmt.Sprint(e.dup.ID):   "true|business_key:open|" + fmt.Sprint(e.first.ID),
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("delivery %s in the CSV: %q, want %q", id, got[id], w)
			}
		}
	})

	t.Run("SuspectsPage", func(t *testing.T) {
		_, p := c.page("/suspects")
		rows := p.testid("suspect-row")
		if rows.len() != 1 || rows.attrs("data-suspect")[0] != fmt.Sprint(s.ID) {
			t.Fatalf("open suspects: %d rows", rows.len())
		}
		_, p = c.page("/suspects?state=dismissed")
		if p.testid("suspect-row").len() != 0 {
			t.Fatal("a dismissed tab lists the open suspect")
		}
		if code, _ := c.get("/suspects?state=maybe"); code != http.StatusBadRequest {
			t.Fatalf("state=maybe = %d, want 400", code)
		}
	})

	t.Run("Dashboard", func(t *testing.T) {
		if _, err := e.db.RollupStats(context.Background(), 1000); err != nil {
			t.Fatal(err)
		}
		_, p := c.page("/")
		p.testid("card-money-mismatch").shows("1")
		row := p.testid("dashboard-suspects").withAttr("data-kind", "business_key")
		if got := row.testid("open-count").text(); got != "1" {
			t.Fatalf("open suspected duplicates on the dashboard: %q", got)
		}
		row.testid("open-money").shows("EUR 190.00")
	})
}

// selected matches a selected option.
func selected(n *html.Node) bool { return hasAttr(n, "selected") }

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

func TestConsole_Ledger(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	rec := func(key, hash, property, amount, currency string) *storage.Delivery {
		t.Helper()
		d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: "event_id", PayloadHash: hash, Property: property,
			Amount: amount, Currency: currency, Status: 200}
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	rec("l1", "h", "HTL-9", "10.10", "EUR")
	rec("l1", "h", "HTL-9", "10.10", "EUR")
	rec("l1", "h", "HTL-9", "0.20", "EUR")
	rec("l2", "h", "HTL-9", "5000", "JPY")
	mm := rec("l2", "h2", "HTL-9", "6000", "JPY")
	storagetest.SetMoneyMismatch(t, e.db, mm.ID)
	storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectCorrelation, Delivery: mm.ID, Source: "ota",
		Property: "HTL-9", Amount: "6000", Currency: "JPY"})
	c := e.as(t, "viewer")
	filter := "property=HTL-9"

	t.Run("Page", func(t *testing.T) {
		_, p := c.page("/ledger?" + filter)
		eur := p.testid("ledger-totals").withAttr("data-currency", "EUR")
		eur.testid("caught").shows("2", "EUR 10.30")
		jpy := p.testid("ledger-totals").withAttr("data-currency", "JPY")
		jpy.testid("caught").shows("1", "JPY 6,000")
		jpy.testid("money-mismatches").shows("1", "JPY 6,000")
		jpy.testid("at-risk").shows("2", "JPY 12,000")
		if n := p.testid("ledger-row").len(); n != 2 {
			t.Fatalf("%d ledger rows, want 2 (one per currency)", n)
		}
		// Each count links to its deliveries in the events list.
		links := p.testid("ledger").testid("ledger-link").attrs("href")
		if len(links) != 4 {
			t.Fatalf("ledger row links: %v", links)
		}
		for _, l := range links {
			code, ev := c.page(l)
			ids := ev.testid("event-link").text()
			switch {
			case strings.Contains(l, "currency=EUR") && strings.Contains(l, "outcome=duplicate"):
				if code != 200 || ev.testid("event-link").len() != 2 {
					t.Errorf("%s: %d, rows %q; want the 2 EUR duplicates", l, code, ids)
				}
			case code != 200 || ids != fmt.Sprint(mm.ID):
				t.Errorf("%s: %d, rows %q; want %d", l, code, ids, mm.ID)
			}
		}
	})

	t.Run("CSV", func(t *testing.T) {
		_, body := c.get("/ledger.csv?" + filter)
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs[1:] {
			got = append(got, strings.Join(r[1:], ","))
		}
		want := []string{
			"ota,HTL-9,EUR,2,10.30,0,0.00,0,0.00,0,0.00,0,0.00,0,0.00,0,0.00,0,0",
			"ota,HTL-9,JPY,1,6000,1,6000,0,0,1,6000,0,0,2,12000,0,0,0,0",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("ledger CSV:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if day := recs[1][0]; day != e.clock.Now().UTC().Format("2006-01-02") {
			t.Fatalf("day %q", day)
		}
	})

	t.Run("BadFilter", func(t *testing.T) {
		if code, _ := c.get("/ledger?from=yesterday"); code != http.StatusBadRequest {
			t.Fatalf("from=yesterday = %d, want 400", code)
		}
		if code, _ := c.get("/ledger.csv?from=2026-12-02&to=2026-12-01"); code != http.StatusBadRequest {
			t.Fatalf("from after to = %d, want 400", code)
		}
	})
}

func TestAPI_Forensics(t *testing.T) {
	e := newAPIEnv(t)
	first := e.record(t, "k1", `{"booking_id":"BK-1","refund":{"amount":10}}`, false)
	dup := e.record(t, "k1", `{"booking_id":"BK-1","refund":{"amount":20}}`, false)
	other := e.record(t, "k2", `{"booking_id":"BK-1","refund":{"amount":10}}`, false)
	storagetest.SetMoneyMismatch(t, e.db, dup.ID)
	s := storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: other.ID, Other: first.ID,
		Source: "ota", Booking: "BK-1", Amount: "10.00", Currency: "EUR"})
	ids := func(out map[string]any, field string) string {
		var got []string
		list, _ := out[field].([]any)
		for _, x := range list {
			got = append(got, x.(map[string]any)["id"].(string))
		}
		return strings.Join(got, " ")
	}

	t.Run("Deliveries", func(t *testing.T) {
		for _, tc := range []struct{ query, want string }{
			{"mismatch=money", idStr(dup.ID)},
			{"mismatch=true", idStr(dup.ID)},
			{"flag=any", idStr(other.ID)},
			{"flag=business_key&flag_state=open", idStr(other.ID)},
			{"flag=correlation", ""},
		} {
			code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?"+tc.query, "")
			if got := ids(out, "deliveries"); code != 200 || got != tc.want {
				t.Errorf("deliveries?%s = %d %q, want %q", tc.query, code, got, tc.want)
			}
		}
		for _, q := range []string{"mismatch=maybe", "flag=odd", "flag=any&flag_state=sure"} {
			if code, _ := e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?"+q, ""); code != 400 {
				t.Errorf("deliveries?%s = %d, want 400", q, code)
			}
		}
		// Each delivery carries its flags, in the list and alone, on both sides.
		_, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries", "")
		for _, x := range out["deliveries"].([]any) {
			d := x.(map[string]any)
			flags, _ := d["flags"].([]any)
			want := d["id"] == idStr(first.ID) || d["id"] == idStr(other.ID)
			if (len(flags) == 1) != want {
				t.Errorf("delivery %v in the list has flags %v", d["id"], flags)
			}
			if d["money_mismatch"] != (d["id"] == idStr(dup.ID)) {
				t.Errorf("delivery %v: money_mismatch %v", d["id"], d["money_mismatch"])
			}
		}
		_, out = e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries/"+idStr(first.ID), "")
		flags, _ := out["delivery"].(map[string]any)["flags"].([]any)
		if len(flags) != 1 || flags[0].(map[string]any)["delivery"] != idStr(other.ID) ||
			flags[0].(map[string]any)["other"] != idStr(first.ID) || flags[0].(map[string]any)["kind"] != "business_key" {
			t.Fatalf("flags of the first delivery: %v", flags)
		}
	})

	t.Run("Suspects", func(t *testing.T) {
		for _, tc := range []struct{ query, want string }{
			{"", idStr(s.ID)},
			{"delivery=" + idStr(first.ID), idStr(s.ID)},
			{"delivery=" + idStr(dup.ID), ""},
			{"state=open&kind=business_key&source=ota", idStr(s.ID)},
			{"state=dismissed", ""},
		} {
			code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/suspects?"+tc.query, "")
			if got := ids(out, "suspects"); code != 200 || got != tc.want {
				t.Errorf("suspects?%s = %d %q, want %q", tc.query, code, got, tc.want)
			}
		}
		if code, _ := e.call(t, storage.RoleViewer, "GET", "/api/v1/suspects?kind=odd", ""); code != 400 {
			t.Errorf("kind=odd = %d, want 400", code)
		}
	})

	t.Run("Review", func(t *testing.T) {
		path := "/api/v1/suspects/" + idStr(s.ID) + "/review"
		for _, tc := range []struct {
			role, path, body string
			code             int
		}{
			{storage.RoleViewer, path, `{"state":"dismissed","reason":"two rooms"}`, 403},
			{storage.RoleOperator, path, `{"state":"open","reason":"two rooms"}`, 400},
			{storage.RoleOperator, path, `{"state":"dismissed","reason":" "}`, 400},
			{storage.RoleOperator, path, `{"state":"dismissed","reason":"x","extra":1}`, 400},
			{storage.RoleOperator, "/api/v1/suspects/999/review", `{"state":"dismissed","reason":"two rooms"}`, 404},
		} {
			if code, out := e.call(t, tc.role, "POST", tc.path, tc.body); code != tc.code || out["error"] == nil {
				t.Errorf("%s %s %s = %d %v, want %d", tc.role, tc.path, tc.body, code, out, tc.code)
			}
		}
		if x, _ := e.db.Suspect(context.Background(), s.ID); x.State != storage.SuspectOpen {
			t.Fatalf("after refused reviews: %+v", x)
		}
		code, out := e.call(t, storage.RoleOperator, "POST", path, `{"state":"dismissed","reason":"two rooms"}`)
		if code != 200 || out["state"] != "dismissed" || out["reviewed_by"] != "operator-user" || out["reason"] != "two rooms" {
			t.Fatalf("review = %d %v", code, out)
		}
		es, err := e.db.AuditLog(context.Background(), 0, 10)
		if err != nil || len(es) == 0 || es[0].Action != "dismiss suspect" || es[0].Actor != "operator-user" {
			t.Fatalf("audit = %+v, %v", es, err)
		}
	})

	t.Run("Ledger", func(t *testing.T) {
		code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/ledger", "")
		rows, _ := out["rows"].([]any)
		if code != 200 || len(rows) != 1 {
			t.Fatalf("ledger = %d %v", code, out)
		}
		row := rows[0].(map[string]any)
		mm := row["money_mismatch"].(map[string]any)
		if row["currency"] != "" || mm["count"] != 1.0 || row["day"] == nil {
			t.Fatalf("ledger row = %v", row)
		}
		// The dismissed suspect is no money at risk; the row links to its deliveries.
		if bk := row["business_key_open"].(map[string]any); bk["count"] != 0.0 {
			t.Fatalf("a dismissed suspect is at risk: %v", bk)
		}
		link, _ := row["deliveries"].(map[string]any)["money_mismatch"].(string)
		code, list := e.call(t, storage.RoleViewer, "GET", link, "")
		if code != 200 || ids(list, "deliveries") != idStr(dup.ID) {
			t.Fatalf("GET %s = %d %v", link, code, list)
		}
		storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectLateDuplicate, Delivery: dup.ID, Source: "ota",
			Property: "P2", Amount: "3", Currency: "USD"})
		_, out = e.call(t, storage.RoleViewer, "GET", "/api/v1/ledger?limit=1", "")
		if rows, _ := out["rows"].([]any); len(rows) != 1 || out["more"] != true || len(out["totals"].([]any)) != 2 {
			t.Fatalf("ledger with limit 1: %v", out)
		}
		if code, _ := e.call(t, storage.RoleViewer, "GET", "/api/v1/ledger?from=monday", ""); code != 400 {
			t.Fatalf("from=monday = %d, want 400", code)
		}
	})
}

// TestConsole_LedgerCSVUnsummed: a money mismatch whose amount is no exact number of
// cents is one amount left out of the sums, though it stands in the caught and the
// at-risk columns alike.
func TestConsole_LedgerCSVUnsummed(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	for _, hash := range []string{"h", "h2"} {
		d := &storage.Delivery{Source: "ota", Key: "u1", KeyMethod: "event_id", PayloadHash: hash, Property: "HTL-7",
			Amount: "12.345", Currency: "EUR", Status: 200}
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		if d.Outcome == storage.Duplicate {
			storagetest.SetMoneyMismatch(t, e.db, d.ID)
		}
	}
	_, body := e.as(t, "viewer").get("/ledger.csv?property=HTL-7")
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("ledger CSV: %q", recs)
	}
	row := recs[1]
	if caught, mm, unsummed := row[4], row[6], row[slices.Index(recs[0], "unsummed")]; caught != "1" || mm != "1" || unsummed != "1" {
		t.Errorf("caught %s, money mismatches %s, unsummed %s; want 1, 1, 1 (one delivery): %q", caught, mm, unsummed, row)
	}
}

// The money at stake that the suspects page and the dashboard show per currency leaves
// out amounts that are no exact number of cents ("12,50" as some systems write it): it
// must say how many it left out, as the ledger does, rather than show a smaller sum, or
// 0.00, as if it were the whole.
func TestConsole_SuspectMoneySaysWhatItLeftOut(t *testing.T) {
	e := newConsoleEnv(t)
	e.businessKeyPair(t, 1, "B1", "80.00")
	e.businessKeyPair(t, 2, "B2", "12,50")
	c := e.as(t, "viewer")
	for _, path := range []string{"/suspects", "/"} {
		row := openBusinessKeySuspects(c, path)
		if got := row.testid("open-count").text(); got != "2" {
			t.Fatalf("%s: open suspected duplicates %q, want 2", path, got)
		}
		row.testid("open-money").shows("EUR 80.00", "+1 unsummed")
	}
}

// The same money says when the suspects carried no amount, rather than show EUR 0.00,
// which a revenue manager reads as nothing at stake; beside suspects that carried one,
// it counts those that did not.
func TestConsole_SuspectMoneyNoAmount(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	e.businessKeyPair(t, 1, "B1", "")
	for _, path := range []string{"/suspects", "/"} {
		m := openBusinessKeySuspects(c, path).testid("open-money")
		m.shows("EUR", "no amount (1)")
		if strings.Contains(m.text(), "0.00") {
			t.Errorf("%s: money at stake of a suspect without an amount shows %q; want no sum", path, m.text())
		}
	}
	e.businessKeyPair(t, 2, "B2", "80.00")
	for _, path := range []string{"/suspects", "/"} {
		openBusinessKeySuspects(c, path).testid("open-money").shows("EUR 80.00", "+1 without an amount")
	}
}

// businessKeyPair records two deliveries of source ota under different keys with one
// business key and amount (EUR): an open business-key suspect. n tells pairs' payloads
// apart.
func (e *consoleEnv) businessKeyPair(t *testing.T, n int, business, amount string) {
	t.Helper()
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	for i := range 2 {
		d := &storage.Delivery{Source: "ota", Key: fmt.Sprintf("evt_%s_%d", business, i), KeyMethod: "event_id",
			PayloadHash: fmt.Sprint(n, i), BusinessKey: business, Amount: amount, Currency: "EUR", Status: 200, Body: []byte(`{}`)}
		if err := e.db.Record(context.Background(), d, opt); err != nil {
			t.Fatal(err)
		}
	}
}

// openBusinessKeySuspects is the row of open business-key suspects on the page at path
// (the suspects page or the dashboard).
func openBusinessKeySuspects(c *client, path string) nodes {
	_, p := c.page(path)
	return p.find(func(n *html.Node) bool {
		return hasAttr(n, "data-testid") && attr(n, "data-testid") == "suspect-kind" && attr(n, "data-kind") == "business_key"
	})
}

// A delivery that business_key_blocks made a duplicate of another key's delivery holds
// no claim, and its key's deliveries do not include the one it duplicates: its page
// must name that delivery and why, and must not say that a new delivery of its key
// would be accepted while the business key still blocks it.
func TestConsole_BlockedDeliveryNamesWhatItDuplicates(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour, BusinessBlocks: true}
	var ds []*storage.Delivery
	for i, k := range []string{"evt_1", "evt_2"} {
		d := &storage.Delivery{Source: "ota", Key: k, KeyMethod: "event_id", PayloadHash: fmt.Sprint(i), BusinessKey: "B",
			Amount: "80.00", Currency: "EUR", Status: 200, Body: []byte(`{}`)}
		if err := e.db.Record(ctx, d, opt); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	first, blocked := ds[0], ds[1]
	if blocked.Outcome != storage.Duplicate || blocked.FirstDelivery != first.ID {
		t.Fatalf("second = %s of %d, want a duplicate of %d", blocked.Outcome, blocked.FirstDelivery, first.ID)
	}
	c := e.as(t, "viewer")
	_, p := c.page(fmt.Sprintf("/events/%d", blocked.ID))
	note := p.testid("blocked-by")
	note.shows(fmt.Sprintf("delivery %d", first.ID), "business key")
	if hrefs := note.hrefs(); !slices.Contains(hrefs, fmt.Sprintf("/events/%d", first.ID)) {
		t.Errorf("the note links to %q, want delivery %d", hrefs, first.ID)
	}
	if state := p.testid("key-state").text(); strings.Contains(state, "would be accepted") {
		t.Errorf("key state %q of a key whose redelivery would be blocked", state)
	}
	// An ordinary duplicate, of its own key's first delivery, has no such note.
	dup := &storage.Delivery{Source: "ota", Key: "evt_1", KeyMethod: "event_id", PayloadHash: "0", BusinessKey: "B",
		Status: 200, Body: []byte(`{}`)}
	if err := e.db.Record(ctx, dup, opt); err != nil {
		t.Fatal(err)
	}
	_, p = c.page(fmt.Sprintf("/events/%d", dup.ID))
	if p.testid("blocked-by").len() != 0 {
		t.Error("an ordinary duplicate's page says it was blocked by a business key")
	}
}

// TestConsole_SuspectCountsSayTheyAreEverySources: the counts and money at stake above
// the suspects list are of every source (the running totals are kept by kind, state and
// currency); filtered to one source, the page says so, rather than let a source's
// money at stake be read from every source's.
func TestConsole_SuspectCountsSayTheyAreEverySources(t *testing.T) {
	e := newConsoleEnv(t)
	e.businessKeyPair(t, 1, "B1", "80.00")
	c := e.as(t, "viewer")
	_, p := c.page("/suspects?source=ota")
	p.testid("stats-scope").shows("every source", "ota")
	if _, p := c.page("/suspects"); p.testid("stats-scope").len() != 0 {
		t.Error("the unfiltered page says its counts are of every source: nothing to tell apart")
	}
}
