package web_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hookdedup/hookdedup/web"
)

// A name with no dot but the trailing one ("ai.") is a top-level domain, written
// absolute: never one the network's search domain completes, and one a public site can
// have (several have had an address of their own). On a private address it is refused,
// as any public name is; a bare name without a dot ("hookdedup") is served still.
func TestHostServed_TopLevelName(t *testing.T) {
	served := func(host string) bool {
		var got bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			addr, _ := net.ResolveTCPAddr("tcp", "10.8.0.1:8081")
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
			r.RemoteAddr = "10.8.0.2:50000"
			got = web.HostServed(r, []string{"box.tail1234.ts.net", "ops"})
		}))
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return got
	}
	for _, host := range []string{"ai.", "ai.:8081", "AI.", "hookdedup."} {
		if served(host) {
			t.Errorf("Host %s on a VPN address: served, want refused", host)
		}
	}
	for _, host := range []string{"hookdedup", "hookdedup:8081", "localhost.", "box.local.", "box.tail1234.ts.net.", "ops.", "10.8.0.1"} {
		if !served(host) {
			t.Errorf("Host %s on a VPN address: refused, want served", host)
		}
	}
}
