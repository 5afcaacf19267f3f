package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest sends request line target with method to addr as written, on a connection
// of its own, and returns the answer with its body read.
func rawRequest(t *testing.T, addr, method, target string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, method+" "+target+" HTTP/1.1\r\nHost: hooks.example.test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestServe_PublicAddrPathTricks: with console_addr set, a path the public address does
// not serve as written gets its JSON 404 whatever its form: one not in its clean form
// (//login, /./healthz, /static/../login), which an http.ServeMux would redirect to the
// clean one in HTML, a CONNECT, which it would answer in plain text, and "OPTIONS *",
// which net/http answers itself with an empty 200. The webhooks, health and readiness
// as written are served.
func TestServe_PublicAddrPathTricks(t *testing.T) {
	s := runServeInProcess(t, `addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
`+openSource, nil)
	addr := strings.TrimPrefix(s.p.public.url(), "http://")
	for _, c := range []struct{ method, target string }{
		{"GET", "//login"},
		{"GET", "/./login"},
		{"GET", "/static/../login"},
		{"GET", "/x/../metrics"},
		{"GET", "//healthz"},
		{"GET", "/./readyz"},
		{"HEAD", "//healthz"},
		{"GET", "/%2e/login"},
		{"GET", "/api/v1/../v1/keys"},
		{"CONNECT", addr},
		{"CONNECT", "127.0.0.1:22"},
		{"OPTIONS", "*"},
	} {
		resp, body := rawRequest(t, addr, c.method, c.target)
		want := `{"error":"not found"}` + "\n"
		if c.method == "HEAD" {
			want = ""
		}
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" || body != want {
			t.Errorf("%s %s: %s, Content-Type %q, Location %q, body %q; want 404 application/json %q",
				c.method, c.target, resp.Status, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), body, want)
		}
	}
	for _, target := range []string{"/healthz", "/readyz", "/healthz?probe=1"} {
		if resp, body := rawRequest(t, addr, "GET", target); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s %q, want 200", target, resp.Status, body)
		}
	}
}
