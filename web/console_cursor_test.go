package web_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// refusal is what a page that refused its request says: an error page's message, or
// the alert above a list that keeps its filter form.
func refusal(p nodes) string {
	return strings.TrimSpace(p.class("error-page").text() + " " + p.withAttr("role", "alert").text())
}

// olderLink is the address of p's link to its next page, "" on the last page.
func olderLink(p nodes) string {
	if hrefs := p.testid("next").attrs("href"); len(hrefs) > 0 {
		return hrefs[0]
	}
	for _, a := range p.class("pager").tag("a").list {
		if t := (nodes{t: p.t, list: []*html.Node{a}}).text(); strings.HasPrefix(t, "Older") || strings.HasPrefix(t, "Next") {
			return attr(a, "href")
		}
	}
	return ""
}

// TestConsole_BadPageCursorRefused: every console list refuses a page address whose
// before is not the id a page's Older link gives, with a 400 that names before and
// quotes what the address held, so that whoever edited or cut the link sees which part
// of it is wrong. An empty before names no page and is the first, as it is to the API.
// The stuck keys' after, and a cursor given to the tab that does not take it, are
// refused in the same words.
func TestConsole_BadPageCursorRefused(t *testing.T) {
	e := newConsoleEnv(t)
	op := e.as(t, storage.RoleOperator)
	lists := []string{"/events", "/events?source=ota", "/keys?state=all", "/keys?state=failed&source=pms",
		"/alerts", "/alerts?state=all", "/audit", "/bulk", "/bulk/pending", "/suspects", "/suspects?state=all"}
	bad := []string{"abc", "0", "-5", "1.5", " ", "9223372036854775808", "5 ", "0x10"}
	with := func(list, name, value string) string {
		sep := "?"
		if strings.Contains(list, "?") {
			sep = "&"
		}
		return list + sep + name + "=" + url.QueryEscape(value)
	}
	for _, list := range lists {
		for _, v := range bad {
			path := with(list, "before", v)
			code, p := op.page(path)
			msg := refusal(p)
			if code != http.StatusBadRequest || !strings.Contains(msg, "before") || !strings.Contains(msg, strconv.Quote(v)) {
				t.Errorf("%s = %d %q; want 400 naming before and quoting %q", path, code, msg, v)
			}
		}
		path := with(list, "before", "")
		if code, p := op.page(path); code != http.StatusOK {
			t.Errorf("%s = %d %q; want 200, the first page", path, code, refusal(p))
		}
	}
	for _, tt := range []struct{ path, name, value string }{
		{"/keys?state=stuck&before=5", "before", "5"},
		{"/keys?before=abc", "before", "abc"},
		{"/keys?state=stuck&after=x", "after", "x"},
		{"/keys?state=all&after=x", "after", "x"},
		{"/keys?state=failed&after=" + url.QueryEscape("2026-01-01"), "after", "2026-01-01"},
	} {
		code, p := op.page(tt.path)
		msg := refusal(p)
		if code != http.StatusBadRequest || !strings.Contains(msg, "page address is not valid") ||
			!strings.Contains(msg, tt.name) || !strings.Contains(msg, strconv.Quote(tt.value)) {
			t.Errorf("%s = %d %q; want 400 naming %s and quoting %q", tt.path, code, msg, tt.name, tt.value)
		}
	}
}

// TestConsole_OlderReachesEveryRow: following a list's Older (the stuck keys' Next)
// from its first page lists every row once, a page of the list's own size at a time,
// and every page's links, older and back to the newest, keep the filter or tab of the
// first.
func TestConsole_OlderReachesEveryRow(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many rows")
	}
	ctx := context.Background()
	e := newConsoleEnv(t, alertsConfig)
	// The alerts and the audit log fill their last page exactly: its Older link would
	// lead to an empty page.
	const processed, failed, alerts, audits, suspects = 120, 510, 100, 73, 130
	bulkKeys(t, e.db, "ota", processed)
	if err := storagetest.BulkLoad(ctx, e.db, storagetest.Fill{Source: "ota", Keys: failed, State: storage.StateFailed,
		ClaimedAt: e.db.Now(), TTL: 24 * time.Hour, Headers: "{}",
		Key:  func(i int) string { return fmt.Sprintf("failed-%06d", i) },
		Body: func(int) []byte { return []byte("{}") }}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range alerts {
		openAlert(t, e.db, "downstream", fmt.Sprintf("subject-%03d", i))
	}
	for i := range audits {
		if err := e.db.AppendAudit(ctx, storage.AuditEntry{Actor: "admin", Action: "reveal secret", Source: "ota",
			Reason: fmt.Sprintf("entry-%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range suspects {
		storagetest.AddSuspect(t, e.db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: e.dup.ID,
			Other: e.first.ID, Source: "ota", Booking: fmt.Sprintf("BK-%03d", i)})
	}
	audited, err := e.db.AuditLog(ctx, 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(audited); i%50 != 0; i++ {
		if err := e.db.AppendAudit(ctx, storage.AuditEntry{Actor: "admin", Action: "reveal secret", Source: "ota",
			Reason: fmt.Sprintf("filler-%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	op := e.as(t, storage.RoleOperator)
	if audited, err = e.db.AuditLog(ctx, 0, 100_000); err != nil {
		t.Fatal(err)
	}

	texts := func(sel nodes) []string {
		var out []string
		for _, x := range sel.list {
			out = append(out, nodes{t: t, list: []*html.Node{x}}.text())
		}
		return out
	}
	rowsOf := map[string]func(nodes) []string{
		"events":   func(p nodes) []string { return texts(p.testid("event-link")) },
		"keys":     func(p nodes) []string { return p.testid("key-check").attrs("value") },
		"alerts":   func(p nodes) []string { return p.testid("alert-row").attrs("data-alert") },
		"audit":    func(p nodes) []string { return texts(p.testid("audit-row")) },
		"suspects": func(p nodes) []string { return p.testid("suspect-row").attrs("data-suspect") },
	}
	defaultTab := map[string]string{"/alerts": "active", "/suspects": "open"}
	for _, tt := range []struct {
		first string
		rows  string
		total int
		size  int // rows on a full page
	}{
		{"/events", "events", 4 + processed + failed, 50},
		{"/events?source=ota&outcome=accepted", "events", 1 + processed + failed, 50},
		{"/keys?state=all", "keys", 2 + processed + failed, 100},
		{"/keys?state=failed&source=ota", "keys", failed, 100},
		{"/keys?state=stuck", "keys", 1 + failed, 500},
		{"/alerts", "alerts", alerts, 50},
		{"/alerts?state=all", "alerts", alerts, 50},
		{"/audit", "audit", len(audited), 50},
		{"/suspects", "suspects", suspects, 100},
		{"/suspects?state=open&source=ota&kind=business_key", "suspects", suspects, 100},
	} {
		first, _ := url.Parse(tt.first)
		var rows []string
		path := tt.first
		for pages := 0; path != ""; pages++ {
			if pages > 20 {
				t.Fatalf("%s: the pages never end", tt.first)
			}
			code, p := op.page(path)
			if code != http.StatusOK {
				t.Fatalf("%s = %d %q", path, code, refusal(p))
			}
			got := rowsOf[tt.rows](p)
			if pages == 0 && len(got) != min(tt.size, tt.total) {
				t.Errorf("%s lists %d rows; want %d", path, len(got), min(tt.size, tt.total))
			}
			if pages > 0 && len(got) == 0 {
				t.Errorf("%s: page %d, which an Older link led to, is empty", tt.first, pages+1)
			}
			rows = append(rows, got...)
			backs := 0
			for _, a := range p.class("pager").tag("a").list {
				if !strings.HasPrefix(nodes{t: t, list: []*html.Node{a}}.text(), "←") {
					continue
				}
				backs++
				back, err := url.Parse(attr(a, "href"))
				want := first.Query()
				// A link may name the tab that the first page's address left to its default.
				if tab, ok := defaultTab[first.Path]; ok && !want.Has("state") && err == nil && back.Query().Get("state") == tab {
					want.Set("state", tab)
				}
				if pages == 0 || err != nil || back.Path != first.Path || !maps.EqualFunc(back.Query(), want, slices.Equal) {
					t.Errorf("%s: page %d links back to %q; want the first page", tt.first, pages+1, attr(a, "href"))
				}
			}
			if pages > 0 && backs == 0 {
				t.Errorf("%s: page %d has no link back to the first", tt.first, pages+1)
			}
			path = olderLink(p)
			if path == "" {
				break
			}
			next, err := url.Parse(path)
			if err != nil || next.Path != first.Path {
				t.Fatalf("%s: Older links to %q", tt.first, path)
			}
			for k, v := range first.Query() {
				if !slices.Equal(next.Query()[k], v) {
					t.Errorf("%s: Older links to %q, without %s=%s", tt.first, path, k, v[0])
				}
			}
		}
		seen := map[string]bool{}
		for _, r := range rows {
			if seen[r] {
				t.Errorf("%s: %q listed twice", tt.first, r)
			}
			seen[r] = true
		}
		if len(seen) != tt.total {
			t.Errorf("%s: %d rows through Older; want the %d there are", tt.first, len(seen), tt.total)
		}
	}
}
