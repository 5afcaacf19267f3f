package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// failedKeys stores n keys of source that all failed at one moment, at, as an outage
// downstream leaves them: stuck, and all of one updated_at.
func failedKeys(t *testing.T, db *sqlite.DB, source string, n int, at time.Time) {
	t.Helper()
	err := storagetest.BulkLoad(context.Background(), db, storagetest.Fill{Source: source, Keys: n,
		ClaimedAt: at, TTL: 24 * time.Hour, Headers: "{}", State: storage.StateFailed,
		Key:  func(i int) string { return fmt.Sprintf("outage-%04d", i) },
		Body: func(int) []byte { return []byte("{}") }}, nil)
	if err != nil {
		t.Fatal(err)
	}
}

// TestAPI_StuckKeysPages: a stuck listing longer than a page has next, to pass on as
// after; followed, it lists every stuck key once, though all failed in one millisecond.
// A cursor that is not one is refused naming after, and each listing refuses the
// other's cursor.
func TestAPI_StuckKeysPages(t *testing.T) {
	e := newAPIEnv(t)
	failedKeys(t, e.db, "ota", 250, time.Now().Add(-time.Hour))
	seen := map[string]int{}
	var sizes []int
	path := "/api/v1/keys?stuck=true&limit=100"
	for path != "" && len(sizes) < 10 {
		code, out := e.call(t, storage.RoleViewer, "GET", path, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, code, out)
		}
		keys := out["keys"].([]any)
		for _, k := range keys {
			seen[k.(map[string]any)["key"].(string)]++
		}
		sizes = append(sizes, len(keys))
		path = ""
		if next, _ := out["next"].(string); next != "" {
			path = "/api/v1/keys?stuck=true&limit=100&after=" + url.QueryEscape(next)
		}
	}
	if !slices.Equal(sizes, []int{100, 100, 50}) || len(seen) != 250 {
		t.Fatalf("pages of %v, %d keys; want pages of 100, 100, 50 and 250 keys", sizes, len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s listed %d times", k, n)
		}
	}

	for _, tc := range []struct{ query, want string }{
		{"stuck=true&after=12", "after"},
		{"stuck=true&after=x.5", "after"},
		{"stuck=true&after=1764000000000.-5", "after"},
		{"stuck=true&after=1764000000000.0", "after"},
		{"stuck=true&before=5", "before"},
		{"after=1764000000000.5.1764000000000", "after"},
		{"stuck=true&after=1764000000000.5", "after"},
	} {
		code, out := e.call(t, storage.RoleViewer, "GET", "/api/v1/keys?"+tc.query, "")
		if msg := fmt.Sprint(out["error"]); code != http.StatusBadRequest || !strings.HasPrefix(msg, tc.want) {
			t.Errorf("%s: %d %v; want 400 naming %s", tc.query, code, out, tc.want)
		}
	}
}

// TestConsole_StuckKeysPages: the stuck tab lists a page of stuck keys at a time (as
// many as one release takes), links to the next and from there back to the first; the
// pages hold every stuck key once. A page address with a cursor that is not one is
// refused.
func TestConsole_StuckKeysPages(t *testing.T) {
	e := newConsoleEnv(t)
	failedKeys(t, e.db, "ota", 600, e.clock.Now().Add(-time.Hour))
	c := e.as(t, "operator")
	code, p := c.page("/keys")
	if code != http.StatusOK {
		t.Fatalf("GET /keys = %d", code)
	}
	first := p.testid("key-check").attrs("value")
	next := p.testid("next").attrs("href")
	if len(first) != 500 || len(next) != 1 || !strings.Contains(next[0], "state=stuck") || !strings.Contains(next[0], "after=") {
		t.Fatalf("first page: %d keys, next %q; want 500 and a link to the next page of stuck keys", len(first), next)
	}
	p.testid("next").shows("Next")
	if p.testid("first").len() != 0 {
		t.Error("the first page links to the first page")
	}
	code, p = c.page(next[0])
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d", next[0], code)
	}
	second := p.testid("key-check").attrs("value")
	if p.testid("next").len() != 0 {
		t.Errorf("the last page links to another: %q", p.testid("next").attrs("href"))
	}
	if back := p.testid("first").attrs("href"); len(back) != 1 || back[0] != "/keys?state=stuck" {
		t.Errorf("link back to the first page: %q", back)
	}
	seen := map[string]int{}
	for _, k := range append(first, second...) {
		seen[k]++
	}
	for i := range 600 {
		if k := fmt.Sprintf("ota/outage-%04d", i); seen[k] != 1 {
			t.Errorf("%s listed %d times, want once", k, seen[k])
		}
	}

	code, p = c.page("/keys?state=stuck&after=junk")
	if code != http.StatusBadRequest || !strings.Contains(p.text(), "after") {
		t.Errorf("a junk cursor: %d %q; want 400 naming after", code, p.text())
	}
}

// TestConsole_StuckPassKeepsItsThreshold: the pages of one pass through the stuck keys
// agree on which keys are stuck (the first page's threshold travels in the cursor). A
// key that became stuck while the operator paged falls among the keys already paged;
// the last page says so and sends them back to the first page, where it now is.
func TestConsole_StuckPassKeepsItsThreshold(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	load := func(key, state string, at time.Time) {
		t.Helper()
		if err := storagetest.BulkLoad(ctx, e.db, storagetest.Fill{Source: "ota", Keys: 1, ClaimedAt: at, TTL: 24 * time.Hour,
			Headers: "{}", State: state, Key: func(int) string { return key }, Body: func(int) []byte { return []byte("{}") }}, nil); err != nil {
			t.Fatal(err)
		}
	}
	load("slow", storage.StateProcessing, now.Add(-9*time.Minute)) // stuck in a minute (stuck_after 10m)
	failedKeys(t, e.db, "ota", 501, now.Add(-time.Minute))
	c := e.as(t, "operator")
	_, p := c.page("/keys")
	next := p.testid("next").attrs("href")
	if len(next) != 1 || p.testid("became-stuck").len() != 0 {
		t.Fatalf("first page: next %q, became-stuck %d; want a next page and no note", next, p.testid("became-stuck").len())
	}
	e.clock.Add(2 * time.Minute)
	_, p = c.page(next[0])
	keys := p.testid("key-check").attrs("value")
	if len(keys) == 0 || slices.Contains(keys, "ota/slow") {
		t.Fatalf("the last page lists %q; want the failed keys left, not slow, stuck only since the first page", keys)
	}
	note := p.testid("became-stuck")
	if !strings.Contains(note.text(), "1 key became stuck") || !slices.Equal(note.hrefs(), []string{"/keys?state=stuck"}) {
		t.Fatalf("the last page's note: %q %q; want 1 key became stuck, linking to the first page", note.text(), note.hrefs())
	}
	_, p = c.page("/keys")
	if !slices.Contains(p.testid("key-check").attrs("value"), "ota/slow") {
		t.Error("slow is not on the first page once stuck")
	}
}

// TestAPI_ReleaseSetSaysWhenItStoppedShort: a set release takes at most
// storage.MaxKeysPerRelease keys a call: a call that stopped there says more may match,
// and the next releases the rest and says nothing is left.
func TestAPI_ReleaseSetSaysWhenItStoppedShort(t *testing.T) {
	e := newAPIEnv(t)
	failedKeys(t, e.db, "ota", storage.MaxKeysPerRelease+1, time.Now().Add(-time.Hour))
	const set = `{"source":"ota","state":"failed","reason":"PMS back after the outage"}`
	for _, want := range []struct {
		matched int
		more    bool
	}{{storage.MaxKeysPerRelease, true}, {1, false}} {
		code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release", set)
		if code != 200 || out["matched"] != float64(want.matched) || out["more"] != want.more {
			t.Fatalf("set release: %d matched %v more %v; want matched %d more %t", code, out["matched"], out["more"], want.matched, want.more)
		}
	}
}
