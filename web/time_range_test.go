package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestFilters_TimeRangeRefused: a from or to before 2000, or a from after its to, is
// refused with a 400 naming the parameter by every filter that takes a time range: the
// events list, its CSV and the bulk form in the console, the ledger, its CSV and the API's
// ledger, deliveries and suspects. Year 1, Go's zero time, was read as no bound at all:
// to=0001-01-01 listed every delivery instead of none, and a from after to listed nothing
// without a word.
func TestFilters_TimeRangeRefused(t *testing.T) {
	e := newConsoleEnv(t)
	op := e.as(t, storage.RoleOperator)
	a := newAPIEnv(t)
	type bad struct {
		q     url.Values
		param string
	}
	times := []bad{
		{url.Values{"to": {"0001-01-01T00:00:00Z"}}, "to"},
		{url.Values{"from": {"0001-01-01T00:00:00Z"}}, "from"},
		{url.Values{"from": {"0026-11-30T08:00:00Z"}}, "from"},
		{url.Values{"from": {"2026-12-01T00:00:00Z"}, "to": {"2026-11-30T00:00:00Z"}}, "from"},
	}
	for _, b := range append(times,
		bad{url.Values{"to": {"0001-01-01T00:00"}}, "to"},
		bad{url.Values{"from": {"2026-12-01T00:00"}, "to": {"2026-11-30T00:00"}}, "from"},
	) {
		code, p := op.page("/events?" + b.q.Encode())
		if msg := p.withAttr("role", "alert").text(); code != http.StatusBadRequest || !strings.Contains(msg, b.param) {
			t.Errorf("/events?%s = %d %q; want 400 naming %s", b.q.Encode(), code, msg, b.param)
		}
		if code, body := op.get("/events.csv?" + b.q.Encode()); code != http.StatusBadRequest || !strings.Contains(body, b.param) {
			t.Errorf("/events.csv?%s = %d %q; want 400 naming %s", b.q.Encode(), code, body, b.param)
		}
		form := url.Values{"kind": {"release"}, "source": {"ota"}, "reason": {"tidy"}}
		for k, v := range b.q {
			form[k] = v
		}
		if code, body, _ := op.post("/bulk", form); code != http.StatusBadRequest || !strings.Contains(body, b.param) {
			t.Errorf("bulk preview with %s = %d; want 400 naming %s", b.q.Encode(), code, b.param)
		}
	}
	for _, b := range times {
		for _, path := range []string{"/api/v1/deliveries?", "/api/v1/suspects?"} {
			code, out := a.call(t, storage.RoleViewer, "GET", path+b.q.Encode(), "")
			if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, b.param+"=") {
				t.Errorf("%s%s = %d %v; want 400 naming %s", path, b.q.Encode(), code, out, b.param)
			}
		}
	}
	for _, b := range []bad{
		{url.Values{"from": {"0001-01-01"}}, "from"},
		{url.Values{"from": {"0001-01-01"}, "to": {"2026-11-30"}}, "from"},
		{url.Values{"to": {"1999-12-31"}}, "to"},
		{url.Values{"from": {"2026-12-01"}, "to": {"2026-11-30"}}, "from"},
	} {
		code, out := a.call(t, storage.RoleViewer, "GET", "/api/v1/ledger?"+b.q.Encode(), "")
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, b.param+"=") {
			t.Errorf("API ledger?%s = %d %v; want 400 naming %s", b.q.Encode(), code, out, b.param)
		}
		code, p := op.page("/ledger?" + b.q.Encode())
		if msg := p.withAttr("role", "alert").text(); code != http.StatusBadRequest || !strings.Contains(msg, b.param) {
			t.Errorf("/ledger?%s = %d %q; want 400 naming %s", b.q.Encode(), code, msg, b.param)
		}
		if code, body := op.get("/ledger.csv?" + b.q.Encode()); code != http.StatusBadRequest || !strings.Contains(body, b.param) {
			t.Errorf("/ledger.csv?%s = %d %q; want 400 naming %s", b.q.Encode(), code, body, b.param)
		}
	}
	// A range of one day, and one without an end, are what a user means.
	for _, q := range []string{"from=2026-11-30&to=2026-11-30", "from=2000-01-01", "to=9999-12-31"} {
		if code, out := a.call(t, storage.RoleViewer, "GET", "/api/v1/ledger?"+q, ""); code != http.StatusOK {
			t.Errorf("API ledger?%s = %d %v; want 200", q, code, out)
		}
	}
	if code, _ := op.page("/events?from=2026-11-30T08:00&to=2026-11-30T08:00"); code != http.StatusOK {
		t.Errorf("/events from and to the same minute = %d; want 200", code)
	}
}
