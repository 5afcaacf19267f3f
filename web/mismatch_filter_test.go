package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestEvents_MismatchFilterValues: the events list, its CSV and the API read mismatch
// as 1/true, money or 0/false alike, and refuse any other value with a 400 naming the
// parameter, rather than list every mismatch (the console) for a value it does not know.
func TestEvents_MismatchFilterValues(t *testing.T) {
	e := newConsoleEnv(t)
	op := e.as(t, storage.RoleOperator)
	a := newAPIEnv(t)
	for _, v := range []string{"maybe", "yes", "MONEY", "2"} {
		q := "mismatch=" + v
		code, p := op.page("/events?" + q)
		if msg := p.withAttr("role", "alert").text(); code != http.StatusBadRequest || !strings.Contains(msg, "mismatch") {
			t.Errorf("/events?%s = %d %q; want 400 naming mismatch", q, code, msg)
		}
		if code, body := op.get("/events.csv?" + q); code != http.StatusBadRequest || !strings.Contains(body, "mismatch") {
			t.Errorf("/events.csv?%s = %d %q; want 400 naming mismatch", q, code, body)
		}
		code, out := a.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?"+q, "")
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "mismatch") {
			t.Errorf("API deliveries?%s = %d %v; want 400 naming mismatch", q, code, out)
		}
	}
	// The fixture's duplicate differs from its first delivery in its refund.
	for q, want := range map[string]int{"": 4, "mismatch=0": 4, "mismatch=false": 4, "mismatch=1": 1, "mismatch=true": 1, "mismatch=money": 1} {
		code, p := op.page("/events?" + q)
		if n := p.testid("event-link").len(); code != http.StatusOK || n != want {
			t.Errorf("/events?%s = %d, %d rows; want %d", q, code, n, want)
		}
	}
	for _, q := range []string{"mismatch=1", "mismatch=0", "mismatch=true", "mismatch=money"} {
		if code, out := a.call(t, storage.RoleViewer, "GET", "/api/v1/deliveries?"+q, ""); code != http.StatusOK {
			t.Errorf("API deliveries?%s = %d %v; want 200", q, code, out)
		}
	}
}
