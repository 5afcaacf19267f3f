package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A delivery whose body is still arriving when serve is told to stop, and arrives within
// read_timeout, is stored and answered 200, and serve then exits cleanly: the drain
// waits as long as a request may take under the configured timeouts, here longer than
// a fixed wait of 15 s would have.
func TestServe_ShutdownFinishesSlowUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("a body that takes 17 s to arrive")
	}
	s := runServeInProcess(t, `addr = "127.0.0.1:0"
read_header_timeout = "2s"
read_timeout = "20s"
write_timeout = "25s"
`+openSource, nil)
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, `{"id":"slow-upload-1",`)
		time.Sleep(17 * time.Second) // within read_timeout, past 15 s
		io.WriteString(pw, `"x":1}`)
		pw.Close()
	}()
	type answer struct {
		code   int
		status string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.p.public.url()+"/webhooks/open", pr)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 40 * time.Second}).Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var a struct{ Status, Error string }
		json.NewDecoder(resp.Body).Decode(&a)
		done <- answer{code: resp.StatusCode, status: a.Status + a.Error}
	}()
	time.Sleep(time.Second) // the request is in flight, its body arriving
	s.stop()                // as SIGTERM does; fails the test unless run returns nil
	if a := <-done; a.err != nil || a.code != http.StatusOK || a.status != "accepted" {
		t.Errorf("a delivery in flight at shutdown, its body complete within read_timeout: %d %q %v; want 200 accepted",
			a.code, a.status, a.err)
	}
}

// TestServe_ShutdownSecondSignalCutsRequestsInFlight: a delivery's body is still
// arriving when serve is told to stop (SIGTERM), so the stop waits for it; a second
// signal (SIGINT) ends the wait at once, and serve exits cleanly.
func TestServe_ShutdownSecondSignalCutsRequestsInFlight(t *testing.T) {
	dir := t.TempDir()
	toml := "read_header_timeout = \"2s\"\nread_timeout = \"20s\"\n" + openSource
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, nil)
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /webhooks/open HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":", u.Host)
	time.Sleep(500 * time.Millisecond)
	s.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(time.Second)
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.exited:
		if err != nil {
			t.Errorf("serve exited with %v after a second signal; want a clean exit", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("serve still running 5 s after a second signal")
	}
}
