package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAPI_ZeroIDRefused: batch=0 on the deliveries and delivery=0 on the suspects name
// no batch and no delivery (ids start at 1): they are refused with a 400 naming the
// parameter, where they were read as no filter and listed everything.
func TestAPI_ZeroIDRefused(t *testing.T) {
	a := newAPIEnv(t)
	for path, param := range map[string]string{
		"/api/v1/deliveries?batch=0": "batch", "/api/v1/deliveries?batch=-3": "batch", "/api/v1/deliveries?batch=x": "batch",
		"/api/v1/suspects?delivery=0": "delivery", "/api/v1/suspects?delivery=00": "delivery",
	} {
		code, out := a.call(t, storage.RoleViewer, "GET", path, "")
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, param+"=") {
			t.Errorf("%s = %d %v; want 400 naming %s", path, code, out, param)
		}
	}
	for _, path := range []string{"/api/v1/deliveries?batch=7", "/api/v1/deliveries?batch=", "/api/v1/suspects?delivery=7", "/api/v1/suspects"} {
		if code, out := a.call(t, storage.RoleViewer, "GET", path, ""); code != http.StatusOK {
			t.Errorf("%s = %d %v; want 200", path, code, out)
		}
	}
}
