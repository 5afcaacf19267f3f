package views

import (
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/views/viewstest"
)

// renderString renders c, for the tests of exactly what a small component writes.

func renderString(t *testing.T, c templ.Component) string {
	t.Helper()
	var b strings.Builder
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestNewChart(t *testing.T) {
	c := NewChart("c1", "Deliveries of ota", []ChartBucket{
		{Label: "Mon", Long: "Mon 00:00", Accepted: 30, Duplicate: 10},
		{Long: "Mon 06:00"},
		{Label: "Tue", Long: "Tue 00:00", Accepted: 5, Rejected: 2},
	})
	if c.Empty || len(c.Bars) != 3 || len(c.XLabels) != 2 || c.Rate == "" {
		t.Fatalf("chart = %+v", c)
	}
	if len(c.Bars[0].Segs) != 2 || len(c.Bars[1].Segs) != 0 || len(c.Bars[2].Segs) != 2 {
		t.Fatalf("segments: %+v", c.Bars)
	}
	if !strings.Contains(c.Desc, "35 accepted, 10 duplicate, 2 rejected") || !strings.Contains(c.Desc, "22.2 %") {
		t.Errorf("desc = %q", c.Desc)
	}
	if top := c.YLabels[len(c.YLabels)-1].Text; top != "40" {
		t.Errorf("axis top = %s, want 40 (peak 40)", top)
	}
	svg := viewstest.One(t, viewstest.Render(t, BarChart(c)), "chart")
	if role, _ := viewstest.Attr(svg, "role"); role != "img" {
		t.Errorf("chart role = %q, want img", role)
	}
	if by, _ := viewstest.Attr(svg, "aria-labelledby"); by != "c1-t c1-d" {
		t.Errorf("chart aria-labelledby = %q, want its title and desc", by)
	}
	byID := func(id string) *html.Node {
		found := viewstest.Find(svg, func(n *html.Node) bool { v, _ := viewstest.Attr(n, "id"); return v == id })
		if len(found) != 1 {
			t.Fatalf("%d elements with id %q in the chart, want 1", len(found), id)
		}
		return found[0]
	}
	if title := byID("c1-t"); title.Data != "title" || viewstest.Text(title) != "Deliveries of ota" {
		t.Errorf("chart title: <%s> %q", title.Data, viewstest.Text(title))
	}
	if desc := byID("c1-d"); desc.Data != "desc" || viewstest.Text(desc) != c.Desc {
		t.Errorf("chart desc: <%s> %q, want %q", desc.Data, viewstest.Text(desc), c.Desc)
	}
	bars := viewstest.Find(svg, func(n *html.Node) bool { return n.Data == "g" && viewstest.HasClass(n, "bar") })
	if len(bars) != 3 {
		t.Fatalf("%d bars, want 3", len(bars))
	}
	isDuplicate := func(n *html.Node) bool { return n.Data == "rect" && viewstest.HasClass(n, "duplicate") }
	if all, mon := viewstest.Find(svg, isDuplicate), viewstest.Find(bars[0], isDuplicate); len(all) != 1 || len(mon) != 1 {
		t.Errorf("%d duplicate segments, %d of them Monday's; want Monday's one", len(all), len(mon))
	}
	const want = "Mon 00:00: 30 accepted, 10 duplicate, 0 rejected, duplicate rate 25.0 %"
	if titles := viewstest.Elements(bars[0], "title"); len(titles) != 1 || viewstest.Text(titles[0]) != want {
		t.Errorf("first bar's title: %d titles, want %q", len(titles), want)
	}
	if empty := NewChart("c2", "none", make([]ChartBucket, 4)); !empty.Empty || empty.Rate != "" {
		t.Errorf("empty chart = %+v", empty)
	}
}

func TestNiceCeil(t *testing.T) {
	for n, want := range map[int64]int64{0: 4, 3: 4, 5: 8, 9: 20, 40: 40, 41: 80, 170: 200, 999: 2000} {
		if got := niceCeil(n); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestEventView_EscapesPayload(t *testing.T) {
	const body, header = `{"name":"<script>alert(1)</script>"}`, `"><img src=x onerror=alert(1)>`
	doc := viewstest.Render(t, EventView(Event{
		Page:     Page{Title: "x", User: "ana", Role: "viewer"},
		Row:      EventRow{ID: 7, Outcome: "duplicate", Mismatch: true, Key: "k"},
		Body:     body,
		BodySize: 10,
		Headers:  []Header{{Name: "X-Evil", Value: header}},
	}))
	// The page's own script is an empty element with a src; the payload's is text.
	for _, s := range viewstest.Elements(doc, "script") {
		if s.FirstChild != nil {
			t.Fatalf("a script element with content %q: payload rendered as markup", viewstest.Text(s.FirstChild))
		}
	}
	if imgs := viewstest.Find(doc, func(n *html.Node) bool { _, ok := viewstest.Attr(n, "onerror"); return ok }); len(imgs) > 0 {
		t.Fatalf("an element with onerror: a header rendered as markup")
	}
	if got := viewstest.Text(viewstest.One(t, doc, "body")); got != body {
		t.Errorf("body shown as %q, want %q", got, body)
	}
	if got := viewstest.Text(viewstest.One(t, doc, "headers")); !strings.Contains(got, "X-Evil") || !strings.Contains(got, header) {
		t.Errorf("headers shown as %q, want X-Evil: %s as text", got, header)
	}
	mismatch := viewstest.Find(doc, func(n *html.Node) bool { return viewstest.HasClass(n, "badge-mismatch") })
	if len(mismatch) != 1 || viewstest.Text(mismatch[0]) != "mismatch" {
		t.Errorf("%d mismatch badges, want 1", len(mismatch))
	}
	release := viewstest.Find(doc, func(n *html.Node) bool {
		a, _ := viewstest.Attr(n, "action")
		return n.Data == "form" && a == "/keys/release"
	})
	if len(release) > 0 {
		t.Error("a release form without a key state")
	}
}

func TestFrame_AdminLinks(t *testing.T) {
	viewer := viewstest.Render(t, AuditView(Audit{Page: Page{User: "v", Role: "viewer"}}))
	admin := viewstest.Render(t, AuditView(Audit{Page: Page{User: "a", Role: "admin", IsAdmin: true, IsOperator: true}}))
	usersLinks := func(doc *html.Node) int {
		n := 0
		for _, nav := range viewstest.Elements(doc, "nav") {
			for _, a := range viewstest.Elements(nav, "a") {
				if href, _ := viewstest.Attr(a, "href"); href == "/users" {
					n++
				}
			}
		}
		return n
	}
	if v, a := usersLinks(viewer), usersLinks(admin); v != 0 || a != 1 {
		t.Errorf("the menu has %d links to /users for a viewer and %d for an admin: the users link is for admins only", v, a)
	}
	if empty := viewstest.One(t, viewer, "empty"); viewstest.Text(empty) == "" {
		t.Error("an empty audit log says so")
	}
}
