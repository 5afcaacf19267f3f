package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestAPI_WrongMethod: an endpoint asked with a method it does not take answers 405,
// naming the methods it does take in Allow and in the error, where it answered 404 "no
// such endpoint", which sent a script's author looking for a mistake in the path. A
// path that is no endpoint is still 404, and a token is still needed first.
func TestAPI_WrongMethod(t *testing.T) {
	e := newAPIEnv(t)
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPost, "/api/v1/deliveries", "GET"},
		{http.MethodDelete, "/api/v1/deliveries/1", "GET"},
		{http.MethodGet, "/api/v1/release", "POST"},
		{http.MethodPut, "/api/v1/bulk", "GET, POST"},
		{http.MethodGet, "/api/v1/bulk/1/approve", "POST"},
		{http.MethodPost, "/api/v1/ledger", "GET"},
	} {
		req, _ := http.NewRequest(tc.method, e.srv.URL+tc.path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+e.tokens[storage.RoleOperator])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d, Allow %q; want 405, Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.allow)
		}
		code, out := e.call(t, storage.RoleOperator, tc.method, tc.path, "{}")
		if msg := fmt.Sprint(out["error"]); code != http.StatusMethodNotAllowed || !strings.Contains(msg, tc.allow) {
			t.Errorf("%s %s: %d %q; want 405 naming %s", tc.method, tc.path, code, msg, tc.allow)
		}
	}
	if code, _ := e.call(t, storage.RoleOperator, http.MethodGet, "/api/v1/nothing", ""); code != http.StatusNotFound {
		t.Errorf("GET /api/v1/nothing: %d; want 404", code)
	}
	if code, _ := e.call(t, "", http.MethodPost, "/api/v1/deliveries", ""); code != http.StatusUnauthorized {
		t.Errorf("POST /api/v1/deliveries without a token: %d; want 401", code)
	}
}
