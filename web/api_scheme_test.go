package web_test

import (
	"net/http"
	"testing"
)

// The scheme of an Authorization header is case-insensitive (RFC 9110, 11.1): a client
// that writes "bearer" sends the same credentials as one that writes "Bearer", and
// /metrics already takes either.
func TestAPI_AuthSchemeAnyCase(t *testing.T) {
	e := newAPIEnv(t)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/keys", nil)
		req.Header.Set("Authorization", scheme+" "+e.tokens["viewer"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization: %s <token> = %d, want 200", scheme, resp.StatusCode)
		}
	}
}
