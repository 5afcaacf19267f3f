package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAPI_UnknownParameterRefused: a query parameter an endpoint does not take (a slip
// in its name) is refused with a 400 naming it and the parameters the endpoint takes,
// as a body's unknown field is; it was dropped without a word, and the answer listed
// every delivery, key or suspect instead of those asked for.
func TestAPI_UnknownParameterRefused(t *testing.T) {
	a := newAPIEnv(t)
	for _, tc := range []struct{ method, path, param, takes string }{
		{"GET", "/api/v1/deliveries?sorce=ota", "sorce", "source"},
		{"GET", "/api/v1/deliveries?outcome=duplicate&mismatches=true", "mismatches", "mismatch"},
		{"GET", "/api/v1/keys?stuck=true&sources=ota", "sources", "stuck"},
		{"GET", "/api/v1/key?source=ota&key=k&keys=x", "keys", "key"},
		{"GET", "/api/v1/suspects?state=open&flag=any", "flag", "kind"},
		{"GET", "/api/v1/ledger?from=2026-11-01&until=2026-11-30", "until", "to"},
		{"GET", "/api/v1/alerts?status=open", "status", "state"},
		{"GET", "/api/v1/bulk?kind=release", "kind", "state"},
		{"GET", "/api/v1/deliveries/1?full=1", "full", "none"},
	} {
		code, out := a.call(t, storage.RoleViewer, tc.method, tc.path, "")
		msg, _ := out["error"].(string)
		if code != http.StatusBadRequest || !strings.HasPrefix(msg, tc.param+": no such parameter") || !strings.Contains(msg, tc.takes) {
			t.Errorf("%s %s = %d %v; want 400 naming %s and %s", tc.method, tc.path, code, out, tc.param, tc.takes)
		}
	}
	for _, path := range []string{
		"/api/v1/deliveries?source=ota&outcome=duplicate&mismatch=money&property_none=1&currency_none=1&amount=any&flag=any&flag_state=open&from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z&before=9&limit=5&booking=b&status=s&batch=1",
		"/api/v1/keys?source=ota&state=failed&limit=5&before=9",
		"/api/v1/suspects?delivery=1&kind=correlation&state=open&source=ota&from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z&before=9&limit=5",
		"/api/v1/ledger?source=ota&property=HTL-1&currency=EUR&from=2026-11-01&to=2026-11-30&limit=5",
		"/api/v1/alerts?state=all&before=9&limit=5",
		"/api/v1/bulk?state=done",
	} {
		if code, out := a.call(t, storage.RoleViewer, "GET", path, ""); code != http.StatusOK {
			t.Errorf("GET %s = %d %v; want 200", path, code, out)
		}
	}
}
