package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAPI_LimitOutOfRangeRefused: a list's limit of 0 or over the endpoint's most is
// refused with a 400 naming limit and the range, rather than read as 1 or as the most;
// a limit within it is taken.
func TestAPI_LimitOutOfRangeRefused(t *testing.T) {
	a := newAPIEnv(t)
	for path, most := range map[string]string{
		"/api/v1/deliveries": "500", "/api/v1/keys": "1000", "/api/v1/suspects": "1000",
		"/api/v1/alerts": "500", "/api/v1/ledger": "100000",
	} {
		for _, bad := range []string{"0", most + "1", "-1", "ten"} {
			code, out := a.call(t, storage.RoleViewer, "GET", path+"?limit="+bad, "")
			if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "limit") || !strings.Contains(msg, "1 to "+most) {
				t.Errorf("%s?limit=%s = %d %v; want 400 naming limit from 1 to %s", path, bad, code, out, most)
			}
		}
		for _, good := range []string{"1", most, ""} {
			if code, out := a.call(t, storage.RoleViewer, "GET", path+"?limit="+good, ""); code != http.StatusOK {
				t.Errorf("%s?limit=%s = %d %v; want 200", path, good, code, out)
			}
		}
	}
}
