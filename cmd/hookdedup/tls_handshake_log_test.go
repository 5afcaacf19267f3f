package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServe_TLSHandshakeFailuresNotWarned: with HTTPS on the public address, a
// connection that fails its TLS handshake (a port scanner, a health checker that only
// opens TCP, a client that hangs up) is anyone's doing, at the rate they choose: it
// writes no warning to serve's log.
func TestServe_TLSHandshakeFailuresNotWarned(t *testing.T) {
	dir := t.TempDir()
	_, _, _, cfgPath := tlsFilesConfig(t, dir)
	s := startServe(t, dir, nil, "--config", cfgPath)
	addr := strings.TrimPrefix(s.url, "https://")

	const conns = 200
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.Write([]byte("\x16\x03\x01\x00\x01x")) // a broken ClientHello, then hang up
		c.Close()
	}
	time.Sleep(500 * time.Millisecond) // the server's goroutines log as they see each
	s.stop(t)
	log, err := os.ReadFile(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(log), "TLS handshake error")
	if n > 2 {
		first := ""
		for line := range strings.Lines(string(log)) {
			if strings.Contains(line, "TLS handshake error") {
				first = line
				break
			}
		}
		t.Errorf("%d unauthenticated connections that failed the TLS handshake wrote %d WARN lines, want a bounded few "+
			"(a count at most every few seconds); the first:\n%s", conns, n, first)
	}
}
