package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// closedPipe is the write end of a pipe whose reader has gone (a `| head` that exited):
// a write to it fails with EPIPE, or kills a process that lets SIGPIPE do so.
func closedPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

// TestClosedPipe_TokenAddRevokes: token add whose stdout is a pipe nobody reads any more
// cannot show the token: it revokes it and exits 1 saying so, rather than be killed by
// SIGPIPE with a valid token that nobody holds.
func TestClosedPipe_TokenAddRevokes(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "hookdedup.db")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"user", "add", "admin", "--role", "admin", "--database", db},
		func(string) string { return "" }, strings.NewReader("first-password-1234\n"), &out, &errOut); err != nil {
		t.Fatal(err, errOut.String())
	}
	cmd := exec.Command(hookdedupBinary(t), "token", "add", "admin", "--database", db)
	cmd.Stdout = closedPipe(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "could not print token 1") ||
		!strings.Contains(stderr.String(), "it was revoked") {
		t.Errorf("token add to a closed pipe: %v\n%s\nwant exit 1, and the token revoked", err, stderr.String())
	}
	list, code := cli(t, dir, nil, "", "token", "list", "--database", db)
	rows := strings.Split(strings.TrimSpace(list), "\n")
	if f := strings.Fields(rows[len(rows)-1]); code != 0 || len(rows) != 2 || f[len(f)-1] == "-" {
		t.Errorf("token list after a token add to a closed pipe (exit %d):\n%s\nwant token 1 revoked", code, list)
	}
}

// TestClosedPipe_ServeStopsCleanly: serve whose log went to a pipe that is gone (`serve
// 2>&1 | tee serve.log`, and Ctrl-C ends tee first) still stops as a signal asks: a
// delivery in flight is stored and answered 200, and serve exits 0, rather than being
// killed by SIGPIPE at its first log line of the stop.
func TestClosedPipe_ServeStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(openSource), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(hookdedupBinary(t), "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logR, logW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logW.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	var base string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "hookdedup listening on "); ok {
			base = u
			break
		}
	}
	if base == "" {
		t.Fatal("serve exited before listening")
	}
	go io.Copy(io.Discard, stdout)
	if _, err := bufio.NewReader(logR).ReadString('\n'); err != nil { // the serving line
		t.Fatal(err)
	}
	logR.Close() // tee is gone

	host := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"id":"in-flight"}`
	fmt.Fprintf(c, "POST /webhooks/open HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		host, len(body), body[:5])
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(500 * time.Millisecond)
	fmt.Fprint(c, body[5:])
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("a delivery in flight as serve stops with its log pipe gone: %v %v, want 200", resp, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited with %v, want 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("serve did not stop within 20s of SIGTERM")
	}
}

// TestClosedPipe_ListingEndsQuietly: a list whose reader stopped reading (`user list |
// head -1`) ends without an error message, with the status a shell gives a process
// SIGPIPE ended; a command that changed something says that its output was lost.
func TestClosedPipe_ListingEndsQuietly(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "hookdedup.db")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"user", "add", "admin", "--role", "admin", "--database", db},
		func(string) string { return "" }, strings.NewReader("first-password-1234\n"), &out, &errOut); err != nil {
		t.Fatal(err, errOut.String())
	}
	for _, tc := range []struct {
		args   []string
		stdin  string
		code   int
		stderr string
	}{
		{[]string{"user", "list"}, "", 141, ""},
		{[]string{"keys"}, "", 141, ""},
		{[]string{"user", "password", "admin"}, "second-password-1234\n", 1, "user password ran, but its output could not be written"},
	} {
		cmd := exec.Command(hookdedupBinary(t), append(tc.args, "--database", db)...)
		cmd.Stdin = strings.NewReader(tc.stdin)
		cmd.Stdout = closedPipe(t)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tc.code ||
			(tc.stderr == "" && stderr.Len() != 0) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%v to a closed pipe: %v, stderr %q; want exit %d and %q", tc.args, err, stderr.String(), tc.code, tc.stderr)
		}
	}
}
