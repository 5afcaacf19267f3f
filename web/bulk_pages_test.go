package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/storage"
)

// manyBulkActions makes n reprocesses of e's refund keys (refundKeys) requested by
// operator, through storage: the i-th is started, and waits for approval (its money is
// above withThreshold's), when pending(i), else it stays a preview. It returns the ids
// of all of them and of those waiting, each newest first.
func manyBulkActions(t *testing.T, e *consoleEnv, n int, pending func(i int) bool) (all, waiting []int64) {
	t.Helper()
	ctx := context.Background()
	th := storage.ApprovalThresholds{"EUR": "500.00"}
	req := storage.BulkRequest{Kind: storage.BulkReprocess, Filter: storage.BulkFilter{Source: "ota", Stuck: true},
		Reason: "refund run failed", Actor: "operator", KeySources: []string{"ota", "pms"},
		StuckBefore: e.clock.Now().Add(-10 * time.Minute), Thresholds: th}
	for i := range n {
		a, err := e.db.CreateBulkPreview(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if pending(i) {
			if a, err = e.db.StartBulkAction(ctx, a.ID, "operator", th); err != nil || a.State != storage.BulkPendingApproval {
				t.Fatalf("start: %+v, %v", a, err)
			}
			waiting = append(waiting, a.ID)
		}
		all = append(all, a.ID)
	}
	slices.Reverse(all)
	slices.Reverse(waiting)
	return all, waiting
}

// apiGet answers GET path of e's API with the bearer token tok, decoded.
func apiGet(t *testing.T, e *consoleEnv, tok, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, out
}

// TestAPI_BulkPages: GET /api/v1/bulk and /api/v1/bulk/pending answer the newest 200
// actions and name the cursor of the rest (next, passed as before=), so a script reads
// every action, each once, newest first, and every one waiting for approval, not only
// the newest 200. A cursor that is no id is refused with 400 naming it.
func TestAPI_BulkPages(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	all, waiting := manyBulkActions(t, e, 215, func(i int) bool { return i%20 != 7 })
	previews := slices.DeleteFunc(slices.Clone(all), func(id int64) bool { return slices.Contains(waiting, id) })
	tok, _, err := e.db.CreateToken(context.Background(), storage.RoleViewer, "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	// read follows list's next until it gives none, and returns the ids read and the
	// size of each page.
	read := func(list string) (ids []int64, sizes []int) {
		t.Helper()
		path := list
		for range 10 {
			code, out := apiGet(t, e, tok, path)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %v", path, code, out)
			}
			acts, _ := out["actions"].([]any)
			sizes = append(sizes, len(acts))
			for _, a := range acts {
				id, _ := strconv.ParseInt(a.(map[string]any)["id"].(string), 10, 64)
				ids = append(ids, id)
			}
			next, _ := out["next"].(string)
			if more, _ := out["more"].(bool); more != (next != "") {
				t.Errorf("GET %s: more %v, next %q", path, more, next)
			}
			if next == "" {
				return ids, sizes
			}
			if last := strconv.FormatInt(ids[len(ids)-1], 10); next != last {
				t.Errorf("GET %s: next %q; want the last action's id, %s", path, next, last)
			}
			sep := "?"
			if strings.Contains(list, "?") {
				sep = "&"
			}
			path = list + sep + "before=" + next
		}
		t.Fatalf("%s: the pages never ended", list)
		return nil, nil
	}
	for _, tt := range []struct {
		list  string
		want  []int64
		sizes []int
	}{
		{"/api/v1/bulk", all, []int{200, 15}},
		{"/api/v1/bulk/pending", waiting, []int{200, len(waiting) - 200}},
		{"/api/v1/bulk?state=pending_approval", waiting, []int{200, len(waiting) - 200}},
		{"/api/v1/bulk?state=preview", previews, []int{len(previews)}},
	} {
		ids, sizes := read(tt.list)
		if !slices.Equal(ids, tt.want) {
			t.Errorf("%s: read %d actions, %d of them distinct; want the %d there are, newest first", tt.list, len(ids),
				len(slices.Compact(slices.Clone(ids))), len(tt.want))
		}
		if !slices.Equal(sizes, tt.sizes) {
			t.Errorf("%s: pages of %v actions; want %v", tt.list, sizes, tt.sizes)
		}
	}

	for _, path := range []string{"/api/v1/bulk?before=abc", "/api/v1/bulk?before=0", "/api/v1/bulk?before=-5",
		"/api/v1/bulk?before=1.5", "/api/v1/bulk/pending?before=x", "/api/v1/bulk?state=done&before=%20"} {
		if code, out := apiGet(t, e, tok, path); code != http.StatusBadRequest || !strings.Contains(out["error"].(string), "before") {
			t.Errorf("GET %s: %d %v; want 400 naming before", path, code, out)
		}
	}
}

// rowIDs are the ids of the bulk actions a page lists, in its order.
func rowIDs(t *testing.T, page nodes) []int64 {
	t.Helper()
	var ids []int64
	for _, x := range page.testid("bulk-link").list {
		id, err := strconv.ParseInt(nodes{t: t, list: []*html.Node{x}}.text(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestConsole_BulkPages: the bulk page counts every action waiting for approval, not
// only those among the 30 it lists, and both it and Pending approvals reach the older
// actions through their Older links, each action once, newest first; Pending approvals
// says how many wait in all. A page address whose before is no id is refused.
func TestConsole_BulkPages(t *testing.T) {
	e := newConsoleEnv(t, withThreshold)
	refundKeys(t, e)
	// 224 wait, more than Pending approvals lists at once; the newest 30 hold only 4 of
	// them, which a count among those listed would say.
	all, waiting := manyBulkActions(t, e, 250, func(i int) bool { return i < 222 || i == 240 || i == 248 })
	viewer := e.as(t, storage.RoleViewer)

	// read follows the Older links from first and returns the ids read, the rows of
	// each page, and the first page.
	read := func(first string) (ids []int64, sizes []int, head nodes) {
		t.Helper()
		path := first
		for range 20 {
			code, page := viewer.page(path)
			if code != http.StatusOK {
				t.Fatalf("%s: %d", path, code)
			}
			if path == first {
				head = page
			}
			got := rowIDs(t, page)
			ids, sizes = append(ids, got...), append(sizes, len(got))
			next := page.testid("next")
			if next.len() == 0 {
				return ids, sizes, head
			}
			path = attr(next.list[0], "href")
			if want := "before=" + strconv.FormatInt(got[len(got)-1], 10); !strings.Contains(path, want) {
				t.Errorf("%s: Older links to %q; want %s", first, path, want)
			}
		}
		t.Fatalf("%s: the pages never ended", first)
		return nil, nil, nodes{}
	}

	ids, sizes, head := read("/bulk")
	if got := head.testid("pending-count").text(); got != strconv.Itoa(len(waiting)) {
		t.Errorf("bulk page: %q waiting for approval; want %d, all of them", got, len(waiting))
	}
	if got, want := head.testid("bulk-pending-note").text(), "224 actions waiting for a second operator's approval"; !strings.Contains(got, want) {
		t.Errorf("bulk page says %q; want %q", got, want)
	}
	if !slices.Equal(ids, all) {
		t.Errorf("bulk page: read %d actions through Older; want the %d there are, newest first", len(ids), len(all))
	}
	if sizes[0] != 30 || len(sizes) != (len(all)+29)/30 {
		t.Errorf("bulk pages of %v actions; want 30 a page", sizes)
	}

	ids, sizes, head = read("/bulk/pending")
	if got := head.testid("pending-count").text(); got != strconv.Itoa(len(waiting)) {
		t.Errorf("pending approvals: %q waiting; want %d", got, len(waiting))
	}
	if !slices.Equal(ids, waiting) || !slices.Equal(sizes, []int{200, len(waiting) - 200}) {
		t.Errorf("pending approvals: read %d actions in pages of %v; want the %d waiting, newest first", len(ids), sizes, len(waiting))
	}

	// The bulk page's query is also its form's: Older keeps it.
	_, page := viewer.page("/bulk?kind=reprocess&source=ota")
	if next := page.testid("next"); next.len() != 1 {
		t.Errorf("a filled form's page has %d Older links", next.len())
	} else if href := attr(next.list[0], "href"); !strings.Contains(href, "source=ota") || !strings.Contains(href, "kind=reprocess") {
		t.Errorf("Older of a filled form links to %q; want the form kept", href)
	}
	_, page = viewer.page("/bulk?before=" + strconv.FormatInt(all[len(all)-1], 10))
	if strings.Contains(page.text(), "No bulk action yet") || page.testid("bulk-row").len() != 0 {
		t.Errorf("past the oldest action the page says %q", page.testid("bulk-actions").text())
	}

	for _, path := range []string{"/bulk?before=x", "/bulk?before=0", "/bulk?before=-3", "/bulk/pending?before=1.5", "/bulk/pending?before=0"} {
		if code, body := viewer.get(path); code != http.StatusBadRequest || !strings.Contains(body, "before") {
			t.Errorf("%s: %d; want 400 naming before", path, code)
		}
	}
}
