package views

import (
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
)

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
	svg := renderString(t, BarChart(c))
	for _, want := range []string{`role="img"`, `aria-labelledby="c1-t c1-d"`, `<title id="c1-t">Deliveries of ota</title>`,
		`<desc id="c1-d">`, `class="duplicate"`, `<title>Mon 00:00: 30 accepted, 10 duplicate, 0 rejected, duplicate rate 25.0 %</title>`} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %s", want)
		}
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
	html := renderString(t, EventView(Event{
		Page:     Page{Title: "x", User: "ana", Role: "viewer"},
		Row:      EventRow{ID: 7, Outcome: "duplicate", Mismatch: true, Key: "k"},
		Body:     `{"name":"<script>alert(1)</script>"}`,
		BodySize: 10,
		Headers:  []Header{{Name: "X-Evil", Value: `"><img src=x onerror=alert(1)>`}},
	}))
	if strings.Contains(html, "<script>alert") || strings.Contains(html, "<img src=x") {
		t.Fatal("payload rendered as markup")
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `badge-mismatch`, `data-testid="body"`} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(html, `action="/keys/release"`) {
		t.Error("a release form without a key state")
	}
}

func TestFrame_AdminLinks(t *testing.T) {
	viewer := renderString(t, AuditView(Audit{Page: Page{User: "v", Role: "viewer"}}))
	admin := renderString(t, AuditView(Audit{Page: Page{User: "a", Role: "admin", IsAdmin: true, IsOperator: true}}))
	if strings.Contains(viewer, `href="/users"`) || !strings.Contains(admin, `href="/users"`) {
		t.Error("the users link is for admins only")
	}
	if !strings.Contains(viewer, `data-testid="empty"`) {
		t.Error("an empty audit log says so")
	}
}
