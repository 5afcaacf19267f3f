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

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// fallBackDay is the events list of 2026-10-24 (UTC) as the ledger links to it, with
// the console in Europe/Berlin: [2026-10-24T02:00+02:00, 2026-10-25T02:00+02:00). Its
// end falls in the hour that comes twice when summer time ends, and 2026-10-25T02:00
// as a wall-clock time there names the later instant, 01:00 UTC.
const fallBackDay = "/events?source=ota&from=2026-10-24T02%3A00%3A00%2B02%3A00&to=2026-10-25T02%3A00%3A00%2B02%3A00"

// fallBackDayEnd is the instant fallBackDay ends.
var fallBackDayEnd = time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)

// fallBackOperator is an operator of a console in Europe/Berlin that stored, of source
// ota, deliveries of the keys day-0 … day-(extra-1) and before-midnight on 2026-10-24
// (UTC), the last at 23:30 UTC, and one of after-midnight at 00:30 UTC on the 25th,
// which falls between the two readings of 2026-10-25T02:00.
func fallBackOperator(t *testing.T, extra int) *client {
	t.Helper()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	e := newConsoleEnv(t, func(c *web.Config) { c.Location = berlin })
	ctx := context.Background()
	rec := func(key string) {
		t.Helper()
		d := &storage.Delivery{Source: "ota", Key: key, KeyMethod: "event_id", PayloadHash: "h", Property: "HTL-1",
			Amount: "10.00", Currency: "EUR", Status: 200}
		if err := e.db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Add(time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC).Sub(e.clock.Now()))
	for i := range extra {
		rec("day-" + strconv.Itoa(i))
		e.clock.Add(time.Second)
	}
	e.clock.Add(time.Date(2026, 10, 24, 23, 30, 0, 0, time.UTC).Sub(e.clock.Now()))
	rec("before-midnight")
	e.clock.Add(time.Hour)
	rec("after-midnight")
	e.clock.Add(12 * time.Hour)
	return e.as(t, storage.RoleOperator)
}

// listsDay fails the test unless page lists before-midnight and not after-midnight.
func listsDay(t *testing.T, what string, page nodes) {
	t.Helper()
	txt := page.testid("event-row").text()
	if before, after := strings.Contains(txt, "before-midnight"), strings.Contains(txt, "after-midnight"); !before || after {
		t.Errorf("%s: lists before-midnight %v, after-midnight %v; want true, false", what, before, after)
	}
}

// TestConsole_BulkFormKeepsExactBound: the events list of a day that ends in the hour
// that comes twice links to the bulk form, whose boxes show its bounds as wall-clock
// times. Posted unchanged, as a browser posts it, the preview acts on the keys the list
// showed, not on those of the later reading of the box's time too.
func TestConsole_BulkFormKeepsExactBound(t *testing.T) {
	op := fallBackOperator(t, 0)
	_, page := op.page(fallBackDay)
	listsDay(t, "the day's events list", page)
	links := page.testid("bulk-all").attrs("href")
	if len(links) != 1 {
		t.Fatalf("bulk links: %v", links)
	}
	_, bulk := op.page(links[0])
	if got := bulk.named("to").attrs("value"); len(got) != 1 || got[0] != "2026-10-25T02:00" {
		t.Errorf("the bulk form's to box shows %q, want 2026-10-25T02:00", got)
	}
	post := bulk.testid("bulk-form").formValues()
	post.Set("kind", "release")
	post.Set("reason", "the day's keys")
	code, body, h := op.post("/bulk", post)
	if code != http.StatusSeeOther {
		t.Fatalf("preview of %v: %d %s", post, code, body)
	}
	_, preview := op.page(h.Get("Location"))
	if got := preview.testid("bulk-total").text(); got != "1" {
		t.Errorf("preview from the day's events (1 key listed) posting %v: %s keys; sample %q",
			post, got, preview.testid("bulk-sample-row").text())
	}

	// A form sent back for a missing reason keeps the exact bound.
	post.Del("reason")
	code, body, _ = op.post("/bulk", post)
	if code != http.StatusBadRequest {
		t.Fatalf("preview without a reason: %d", code)
	}
	again := parsePage(t, body).testid("bulk-form").formValues()
	again.Set("kind", "release")
	again.Set("reason", "the day's keys")
	_, _, h = op.post("/bulk", again)
	if _, preview = op.page(h.Get("Location")); preview.testid("bulk-total").text() != "1" {
		t.Errorf("preview posting %v, the form sent back: %s keys", again, preview.testid("bulk-total").text())
	}
}

// TestConsole_EventsFormKeepsExactBound: the events filter form of a day that ends in
// the hour that comes twice, sent unchanged, lists the day as its link did, and its
// links (next page, CSV, bulk) keep the exact bound; a box the user changed is read as
// typed.
func TestConsole_EventsFormKeepsExactBound(t *testing.T) {
	op := fallBackOperator(t, 50) // a page holds 50: the day's list has a next page
	_, page := op.page(fallBackDay)
	listsDay(t, "the day's events list", page)
	if got := page.named("to").attrs("value"); len(got) != 1 || got[0] != "2026-10-25T02:00" {
		t.Errorf("the to box shows %q, want 2026-10-25T02:00", got)
	}
	form := page.testid("filters").formValues()
	_, again := op.page("/events?" + form.Encode())
	listsDay(t, "the form sent unchanged ("+form.Encode()+")", again)

	for _, id := range []string{"csv", "bulk-all", "next"} {
		hrefs := again.testid(id).attrs("href")
		if len(hrefs) != 1 {
			t.Errorf("%s links: %v", id, hrefs)
			continue
		}
		u, err := url.Parse(hrefs[0])
		if err != nil {
			t.Fatal(err)
		}
		if to, err := time.Parse(time.RFC3339, u.Query().Get("to")); err != nil || !to.Equal(fallBackDayEnd) {
			t.Errorf("%s link %s: to names %v (%v), want %v", id, hrefs[0], to, err, fallBackDayEnd)
		}
	}
	if hrefs := again.testid("csv").attrs("href"); len(hrefs) == 1 {
		code, body := op.get(hrefs[0])
		rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if code != http.StatusOK || err != nil {
			t.Fatalf("csv: %d %v", code, err)
		}
		var keys []string
		for _, r := range rows[1:] {
			keys = append(keys, r[11])
		}
		if got := strings.Join(keys, " "); !strings.Contains(got, "before-midnight") || strings.Contains(got, "after-midnight") {
			t.Errorf("csv keys %q; want before-midnight and not after-midnight", got)
		}
	}

	// The user moves the end an hour on: the box is read as typed, in Berlin.
	form.Set("to", "2026-10-25T03:00")
	_, moved := op.page("/events?" + form.Encode())
	if txt := moved.testid("event-row").text(); !strings.Contains(txt, "after-midnight") {
		t.Errorf("to moved to 03:00 (%s) lists %q; want after-midnight too", form.Encode(), txt)
	}
	if got := moved.named("to").attrs("value"); len(got) != 1 || got[0] != "2026-10-25T03:00" {
		t.Errorf("the to box shows %q, want 2026-10-25T03:00", got)
	}
}

// TestConsole_DashboardLinksExactFrom: the dashboard's last 24 hours can start in the
// hour that comes twice when summer time ends; its links to the events list start where
// its counts do, not at the later reading of that hour.
func TestConsole_DashboardLinksExactFrom(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	e := newConsoleEnv(t, func(c *web.Config) { c.Location = berlin })
	e.clock.Add(time.Date(2026, 10, 25, 23, 30, 0, 0, time.UTC).Sub(e.clock.Now()))
	_, page := e.as(t, "viewer").page("/?range=24h")
	var links int
	for _, href := range page.hrefs() {
		u, err := url.Parse(href)
		if err != nil || u.Path != "/events" || u.RawQuery == "" { // the menu's link has no filter
			continue
		}
		links++
		if from, err := time.Parse(time.RFC3339, u.Query().Get("from")); err != nil || !from.Equal(fallBackDayEnd) {
			t.Errorf("link %s: from names %v (%v), want %v", href, from, err, fallBackDayEnd)
		}
	}
	if links == 0 {
		t.Fatalf("no links to the events list: %v", page.hrefs())
	}
}

// TestConsole_BadFromKeepsTo: a From refused leaves To in its box, on the events list
// and on the bulk form: corrected and sent again, the filter still has its end.
func TestConsole_BadFromKeepsTo(t *testing.T) {
	e := newConsoleEnv(t)
	_, page := e.as(t, storage.RoleViewer).page("/events?from=2026-11-30+14%3A00&to=2026-12-01T00%3A00")
	if got := page.named("to").attrs("value"); len(got) != 1 || got[0] != "2026-12-01T00:00" {
		t.Errorf("events: to box %q after a bad From", got)
	}
	_, body, _ := e.as(t, storage.RoleOperator).post("/bulk", url.Values{"kind": {"release"}, "reason": {"r"},
		"from": {"2026-11-30 14:00"}, "to": {"2026-12-01T00:00"}})
	if got := parsePage(t, body).named("to").attrs("value"); len(got) != 1 || got[0] != "2026-12-01T00:00" {
		t.Errorf("bulk: to box %q after a bad From", got)
	}
}

// TestConsole_ExactBoundIsTheBoxs: an exact time counts only while the box shows it;
// one that is not the box's time (a stale form, a crafted link) gives way to the box.
func TestConsole_ExactBoundIsTheBoxs(t *testing.T) {
	e := newConsoleEnv(t)
	rec := func(key string) {
		t.Helper()
		if err := e.db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: key, KeyMethod: "event_id",
			PayloadHash: "h"}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Add(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC).Sub(e.clock.Now()))
	rec("day-before")
	e.clock.Add(28 * time.Hour)
	rec("after-noon")
	_, page := e.as(t, storage.RoleViewer).page("/events?source=ota&from=2026-11-30T12%3A00" +
		"&from_shown=2026-11-30T12%3A00&from_exact=2026-11-29T00%3A00%3A00Z") // from_shown as the box's value makes no difference
	if rows := page.testid("event-row").text(); strings.Contains(rows, "day-before") || !strings.Contains(rows, "after-noon") {
		t.Errorf("box shows %q, with an exact time of another day beside it; list: %q", page.named("from").attrs("value"), rows)
	}
}

// TestConsole_MismatchOff: mismatch=0 and mismatch=false leave the mismatch filter
// off, as the other flags' 0 and false do; they turned it on.
func TestConsole_MismatchOff(t *testing.T) {
	e := newConsoleEnv(t)
	if err := e.db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: "evt_plain", KeyMethod: "event_id",
		PayloadHash: "h"}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	v := e.as(t, storage.RoleViewer)
	for _, off := range []string{"0", "false", ""} {
		if _, page := v.page("/events?mismatch=" + off); !strings.Contains(page.testid("event-row").text(), "evt_plain") {
			t.Errorf("mismatch=%s: the list lacks a delivery without a mismatch", off)
		}
	}
	if _, page := v.page("/events?mismatch=1"); strings.Contains(page.testid("event-row").text(), "evt_plain") {
		t.Errorf("mismatch=1 lists a delivery without a mismatch")
	}
}

// TestLabels_MatchedAsStored: a label filter is matched as labels are stored
// (storage.Label), in the console's form sent again by a browser, which drops line
// breaks from a text box, and in the API.
func TestLabels_MatchedAsStored(t *testing.T) {
	e := newConsoleEnv(t)
	for _, d := range []struct{ key, property string }{{"evt_htl2", storage.Label("HTL-2\r\n")}, {"evt_htl3", "HTL-3"}} {
		if err := e.db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: d.key, KeyMethod: "event_id",
			PayloadHash: "h", Property: d.property}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	v := e.as(t, storage.RoleViewer)
	_, page := v.page("/events?property=HTL-2%0D%0A")
	form := page.testid("filters").formValues()
	form.Set("property", strings.NewReplacer("\r", "", "\n", "").Replace(form.Get("property"))) // as a browser sends it
	for name, q := range map[string]string{"link": "property=HTL-2%0D%0A", "form sent again": form.Encode(),
		"blanks typed": "property=+HTL-2%09"} {
		_, page := v.page("/events?" + q)
		if rows := page.testid("event-row").text(); !strings.Contains(rows, "evt_htl2") || strings.Contains(rows, "evt_htl3") {
			t.Errorf("%s (%s): lists %q; want evt_htl2 alone", name, q, rows)
		}
	}
}

// TestAPI_LabelsMatchedAsStored: the API's label filters trim as the console's do.
func TestAPI_LabelsMatchedAsStored(t *testing.T) {
	e := newAPIEnv(t)
	if err := e.db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: "evt_1", KeyMethod: "event_id",
		PayloadHash: "h", Property: "HTL-2"}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?property=HTL-2%20", "")
	if got, _ := out["deliveries"].([]any); code != http.StatusOK || len(got) != 1 {
		t.Errorf("GET deliveries?property=HTL-2%%20 = %d, %v; want HTL-2's one delivery", code, out)
	}
}

// TestAPI_BulkBlankLabelRefused: a bulk action's label of blanks alone is refused, as
// a blank key is: trimmed as labels are, it would match every key of the source.
func TestAPI_BulkBlankLabelRefused(t *testing.T) {
	e := newConsoleEnv(t)
	refundKeys(t, e)
	tok, _, err := e.db.CreateToken(context.Background(), storage.RoleOperator, "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{`"property":"\r\n"`, `"booking":" "`, `"status":"\t"`} {
		code, body := apiPost(t, e.srv.URL+"/api/v1/bulk", tok, `{"kind":"release","reason":"x","filter":{"source":"ota",`+label+`}}`)
		if code != http.StatusBadRequest || !strings.Contains(body, "blank") {
			t.Errorf("filter %s: %d %.120s; want 400 naming the blank label", label, code, body)
		}
	}
}

// TestConsole_ExactBoundWithSeconds: an exact bound with seconds, which the box cannot
// show, gives way to the box's minute.
func TestConsole_ExactBoundWithSeconds(t *testing.T) {
	op := fallBackOperator(t, 0)
	_, page := op.page("/events?source=ota&to=2026-10-25T01%3A30&to_exact=2026-10-25T01%3A30%3A59.999%2B02%3A00")
	if strings.Contains(page.testid("event-row").text(), "before-midnight") {
		t.Errorf("box To shows %q (23:30 UTC, exclusive) yet the list holds before-midnight, received 23:30:00 UTC",
			page.named("to").attrs("value"))
	}
}
