package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

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
		code, body := c.get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d", path, code)
		}
		mustContain(t, body, "· 1240</small>", `<td class="num">1234</td>`, "(unknown sources)", `<td class="num">6</td>`)
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
			code, body := c.get(tc.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s = %d", tc.path, code)
			}
			if tc.want == "" {
				if strings.Contains(body, `data-testid="not-stored"`) {
					t.Fatal("a line of rejections not stored where none match")
				}
				return
			}
			mustContain(t, body, `data-testid="not-stored"`, tc.want)
		})
	}
}
