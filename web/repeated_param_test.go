package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestFilters_RepeatedParameterRefused: a query that gives a parameter twice is refused
// with a 400 naming it, by the console's pages and CSV exports and by the API alike:
// each reads one value, and the second was dropped without a word (source=ota&source=pms
// listed ota's deliveries alone, as if pms had none).
func TestFilters_RepeatedParameterRefused(t *testing.T) {
	e := newConsoleEnv(t)
	op := e.as(t, storage.RoleOperator)
	for _, path := range []string{
		"/events?source=ota&source=pms",
		"/events.csv?outcome=accepted&outcome=duplicate",
		"/keys?state=failed&state=processed",
		"/suspects?kind=correlation&kind=business_key",
		"/ledger?currency=EUR&currency=USD",
		"/ledger.csv?source=ota&source=pms",
		"/alerts?state=open&state=resolved",
	} {
		name := path[strings.Index(path, "?")+1 : strings.Index(path, "=")]
		code, body := op.get(path)
		if code != http.StatusBadRequest || !strings.Contains(body, name+": given 2 times") {
			t.Errorf("%s = %d; want 400 naming %s", path, code, name)
		}
	}
	a := newAPIEnv(t)
	for _, path := range []string{
		"/api/v1/deliveries?source=ota&source=pms",
		"/api/v1/keys?state=failed&state=processed",
		"/api/v1/suspects?state=open&state=dismissed",
		"/api/v1/ledger?currency=EUR&currency=USD",
		"/api/v1/alerts?state=open&state=resolved",
	} {
		name := path[strings.Index(path, "?")+1 : strings.Index(path, "=")]
		code, out := a.call(t, storage.RoleViewer, "GET", path, "")
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, name+": given 2 times") {
			t.Errorf("%s = %d %v; want 400 naming %s", path, code, out, name)
		}
	}
	// One value each is a filter, as before.
	if code, _ := op.get("/events?source=ota&outcome=duplicate"); code != http.StatusOK {
		t.Errorf("/events with one source and one outcome = %d; want 200", code)
	}
}
