package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAPI_ZeroBeforeRefused: before=0 is no page's next (ids start at 1), and is refused
// with a 400 naming it, as the console refuses it. Read as no cursor, it answered the
// first page again: a client that passes 0 once next is absent (jq's .next // 0) paged
// through the first page for ever.
func TestAPI_ZeroBeforeRefused(t *testing.T) {
	a := newAPIEnv(t)
	for _, path := range []string{"/api/v1/deliveries?before=0", "/api/v1/keys?before=0", "/api/v1/suspects?before=0",
		"/api/v1/alerts?before=0", "/api/v1/deliveries?before=00"} {
		code, out := a.call(t, storage.RoleViewer, "GET", path, "")
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, "before=") {
			t.Errorf("%s = %d %v; want 400 naming before", path, code, out)
		}
	}
	for _, path := range []string{"/api/v1/deliveries?before=7", "/api/v1/deliveries?before=", "/api/v1/keys?before=7",
		"/api/v1/suspects?before=7", "/api/v1/alerts?before=7"} {
		if code, out := a.call(t, storage.RoleViewer, "GET", path, ""); code != http.StatusOK {
			t.Errorf("%s = %d %v; want 200", path, code, out)
		}
	}
}
