package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// TestListings_UnknownSourceRefused: the events list, its export and the keys page
// answered a source filter naming no source with an empty listing ("No keys yet"), so
// a mistyped name in a bookmarked address read as nothing having happened, where
// `hookdedup keys --source` refuses it. They answer 400, naming it and the configured
// sources, as they refuse other bad filter values. A configured source with nothing
// stored, and a source removed from the configuration whose deliveries are still
// stored, are listed as before.
func TestListings_UnknownSourceRefused(t *testing.T) {
	e := newConsoleEnv(t, func(c *web.Config) {
		c.Sources = append(c.Sources, web.Source{Name: "quiet", Scheme: "token", EventID: "/event_id", TTL: time.Hour})
	})
	if err := e.db.Record(context.Background(), &storage.Delivery{Source: "gone", Key: "evt_gone", KeyMethod: "event_id",
		PayloadHash: "g", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	v := e.as(t, storage.RoleViewer)
	for _, path := range []string{"/events?source=otaa", "/events?outcome=rejected&source=otaa", "/events.csv?source=otaa",
		"/keys?source=otaa", "/keys?state=all&source=otaa"} {
		code, body := v.get(path)
		text := parsePage(t, body).text()
		if code != http.StatusBadRequest || !strings.Contains(text, `No source "otaa"`) || !strings.Contains(text, "ota, pms, quiet") {
			t.Errorf("%s = %d %q; want 400 naming the source otaa and the configured ones", path, code, text)
		}
	}
	if code, p := v.page("/events?source=otaa"); p.withAttr("role", "alert").len() == 0 || p.named("source").len() == 0 {
		t.Errorf("/events?source=otaa = %d: want the refusal above the filter, to correct it", code)
	}
	for path, rows := range map[string]func(nodes) int{
		"/events?source=gone":          func(p nodes) int { return p.testid("event-link").len() },
		"/keys?state=all&source=gone":  func(p nodes) int { return p.testid("key-row").len() },
		"/events?source=quiet":         func(p nodes) int { return p.testid("event-link").len() },
		"/keys?state=all&source=quiet": func(p nodes) int { return p.testid("key-row").len() },
	} {
		want := 0
		if strings.HasSuffix(path, "gone") {
			want = 1
		}
		if code, p := v.page(path); code != http.StatusOK || rows(p) != want {
			t.Errorf("%s = %d, %d rows; want 200 and %d", path, code, rows(p), want)
		}
	}
	if code, body := v.get("/events.csv?source=gone"); code != http.StatusOK || !strings.Contains(body, "evt_gone") {
		t.Errorf("/events.csv?source=gone = %d %q; want 200 with its delivery", code, body)
	}
}

// TestAPI_UnknownSourceRefused: the JSON API's lists refuse a source nothing is known
// of as the console's do, with 400 naming it, so that a script with a mistyped name is
// told rather than handed an empty list; the configured source is listed as before.
func TestAPI_UnknownSourceRefused(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "evt_1", `{}`, false)
	for _, path := range []string{"/api/v1/deliveries?source=otaa", "/api/v1/keys?source=otaa", "/api/v1/keys?source=otaa&stuck=true"} {
		code, out := e.call(t, storage.RoleViewer, "GET", path, "")
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, `No source "otaa"`) {
			t.Errorf("%s = %d %v; want 400 naming the source", path, code, out)
		}
	}
	for _, path := range []string{"/api/v1/deliveries?source=ota", "/api/v1/keys?source=ota"} {
		if code, out := e.call(t, storage.RoleViewer, "GET", path, ""); code != http.StatusOK {
			t.Errorf("%s = %d %v; want 200", path, code, out)
		}
	}
}
