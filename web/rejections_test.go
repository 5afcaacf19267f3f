package web_test

import (
	"context"
	"net/http"
	"testing"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
)

// TestConsole_RejectionsNotStored: rejections counted without a delivery row are in the
// dashboard's totals, per source and in all, and the events list says how many of them
// its filter matches beyond the rows it lists.
func TestConsole_RejectionsNotStored(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	if err := e.db.AddRejectionCounts(ctx, []storage.RejectionCount{
		{Source: "ota", Status: 401, Minute: now, Rejections: 1233},
		{Source: "", Status: 404, Minute: now, Rejections: 6},
	}); err != nil {
		t.Fatal(err)
	}
	c := e.as(t, "viewer")

	// One rejection of ota is stored (newConsoleEnv), 1,233 more and 6 of unknown names
	// were counted.
	for _, path := range []string{"/", "/?range=24h"} {
		code, p := c.page(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d", path, code)
		}
		if got := p.testid("card-rejected").tag("small").text(); got != "· 1240" {
			t.Errorf("%s: rejected in all %q, want · 1240", path, got)
		}
		// The rejected column of each source's row.
		rejected := map[string]string{}
		for _, row := range p.testid("source-stats").tag("tbody").tag("tr").list {
			r := nodes{t, []*html.Node{row}}
			if cells := r.tag("td").list; len(cells) > 4 {
				rejected[r.tag("th").text()] = nodes{t, cells[4:5]}.text()
			}
		}
		if rejected["ota"] != "1234" || rejected["(unknown sources)"] != "6" {
			t.Errorf("%s: rejected by source %v, want ota 1234 and (unknown sources) 6", path, rejected)
		}
	}

	for _, tc := range []struct {
		path string
		want string // "" for no line
	}{
		{"/events", "1,239 more rejections not stored individually"},
		{"/events?outcome=rejected", "1,239 more rejections not stored individually"},
		{"/events?source=ota", "1,233 more rejections not stored individually"},
		{"/events?source=pms", ""},
		{"/events?outcome=accepted", ""},
		{"/events?booking=BK-42", ""},
		{"/events?to=2000-01-01T00:00", ""},
		{"/events?before=2", ""}, // the line belongs to the first page
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, p := c.page(tc.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s = %d", tc.path, code)
			}
			line := p.testid("not-stored")
			if tc.want == "" {
				if line.len() > 0 {
					t.Fatal("a line of rejections not stored where none match")
				}
				return
			}
			line.shows(tc.want)
		})
	}
}
