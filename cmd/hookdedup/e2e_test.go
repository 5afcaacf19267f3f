package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// hookdedupBinary builds the binary once per test run.
func hookdedupBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hookdedup-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "hookdedup")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build: %v\n%s", buildErr, binPath)
	}
	return binPath
}

// server is a running `hookdedup serve`.
type server struct {
	cmd      *exec.Cmd
	url      string
	password string
	exited   chan error
}

// startServe starts the binary in dir with args and waits until it listens.
func startServe(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(hookdedupBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, exited: make(chan error, 1)}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Logf("serve log:\n%s", log)
		}
	})
	timeout := time.After(15 * time.Second)
	for s.url == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before listening")
			}
			if pw, ok := strings.CutPrefix(line, "created user admin with one-time password: "); ok {
				s.password = pw
			}
			if u, ok := strings.CutPrefix(line, "hookdedup listening on "); ok {
				s.url = u
			}
		case <-timeout:
			t.Fatal("serve did not listen within 15s")
		}
	}
	go func() {
		for range lines {
		}
	}()
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20s of SIGTERM")
	}
}

// cli runs a subcommand of the binary in dir and returns its output and exit code.
func cli(t *testing.T, dir string, env []string, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(hookdedupBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestEndToEnd_ZeroConfigDemo(t *testing.T) {
	dir := t.TempDir()
	s := startServe(t, dir, nil)
	if len(s.password) < 16 {
		t.Fatalf("no one-time admin password printed (got %q)", s.password)
	}
	// demo signs with the generated secret it reads from the same database.
	out, code := cli(t, dir, nil, "", "demo", "--url", s.url, "--events", "12", "--duplicates", "1")
	if code != 0 {
		t.Fatalf("demo exited %d:\n%s", code, out)
	}
	m := regexp.MustCompile(`sent (\d+) deliveries .*: (\d+) accepted, (\d+) duplicate, (\d+) rejected`).FindStringSubmatch(out)
	if m == nil || m[1] != "24" || m[2] != "12" || m[3] != "12" || m[4] != "0" {
		t.Fatalf("demo summary = %q, want 24 sent, 12 accepted, 12 duplicate:\n%s", m, out)
	}
	// A restart keeps the secret and does not print a password again.
	s.stop(t)
	s = startServe(t, dir, nil)
	if s.password != "" {
		t.Fatal("a second start printed a new admin password")
	}
	if out, code := cli(t, dir, nil, "", "demo", "--url", s.url, "--events", "2", "--duplicates", "0"); code != 0 || !strings.Contains(out, "2 accepted") {
		t.Fatalf("demo after restart: %d\n%s", code, out)
	}
	s.stop(t)

	db, err := storage.Open(filepath.Join(dir, "hookdedup.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.CountDeliveries(context.Background(), "ota")
	if err != nil {
		t.Fatal(err)
	}
	if c.Accepted != 14 || c.Duplicate != 12 || c.Rejected != 0 {
		t.Fatalf("stored %+v, want 14 accepted and 12 duplicates", c)
	}
}

const e2eConfig = `
[[source]]
name = "channel-manager"
signature = "hmac-sha256"
signature_header = "X-Signature"
signature_encoding = "hex"
signature_prefix = "sha256="
secret_env = "CM_SECRET"
key_fields = ["/property_id", "/booking_id", "/status"]
ttl = "1h"
`

func TestEndToEnd_SignedDeliveriesAndCLI(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(e2eConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CM_SECRET=new-secret,old-secret"}
	s := startServe(t, dir, env)

	send := func(secret, body string) (int, map[string]string) {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(body))
		req, _ := http.NewRequest("POST", s.url+"/webhooks/channel-manager", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var a map[string]string
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("answer %q: %v", raw, err)
		}
		return resp.StatusCode, a
	}
	body := `{"property_id":"P-9","booking_id":"B-1","status":"cancelled","refund":{"amount":120}}`
	code, first := send("new-secret", body)
	if code != 200 || first["status"] != "accepted" || !strings.HasPrefix(first["key"], "derived:") {
		t.Fatalf("first: %d %v", code, first)
	}
	// Signed with the old secret during rotation, fields reordered: a duplicate.
	code, dup := send("old-secret", `{"status":"cancelled","booking_id":"B-1","property_id":"P-9","refund":{"amount":120.0}}`)
	if code != 200 || dup["status"] != "duplicate" || dup["key"] != first["key"] || dup["first_delivery"] != first["delivery"] {
		t.Fatalf("duplicate: %d %v (first %v)", code, dup, first)
	}
	if code, a := send("wrong-secret", body); code != 401 || a["error"] == "" {
		t.Fatalf("wrong secret: %d %v", code, a)
	}

	// key: the same key the server gave, and that it is claimed.
	payload := filepath.Join(dir, "payload.json")
	os.WriteFile(payload, []byte(body), 0o600)
	out, code := cli(t, dir, env, "", "key", payload, "--source", "channel-manager")
	if code != 0 || !strings.Contains(out, first["key"]) || !strings.Contains(out, "claimed") || !strings.Contains(out, "yes") ||
		!strings.Contains(out, `{"/booking_id":"B-1","/property_id":"P-9","/status":"cancelled"}`) {
		t.Fatalf("key: %d\n%s", code, out)
	}

	// release, while serve runs, on the same database.
	if out, code := cli(t, dir, env, "", "release", "--source", "channel-manager", "derived:nope", "--reason", "test"); code != 1 || !strings.Contains(out, "no such key") {
		t.Fatalf("release of an unknown key: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "release", "--source", "channel-manager", first["key"], "--reason", "guest rebooked"); code != 0 || !strings.Contains(out, "released") {
		t.Fatalf("release: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "release", first["key"], "--source", "channel-manager", "--reason", "again"); code != 0 || !strings.Contains(out, "nothing changed") {
		t.Fatalf("second release: %d %s", code, out)
	}
	if code, again := send("new-secret", body); code != 200 || again["status"] != "accepted" {
		t.Fatalf("after release: %d %v, want accepted", code, again)
	}

	// user add reads the password from stdin.
	if out, code := cli(t, dir, env, "correct horse battery\n", "user", "add", "rita", "--role", "operator"); code != 0 || !strings.Contains(out, "added user rita (operator)") {
		t.Fatalf("user add: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "short\n", "user", "add", "sam", "--role", "viewer"); code == 0 || !strings.Contains(out, "at least 8") {
		t.Fatalf("user add with a short password: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "version"); code != 0 || !strings.HasPrefix(out, "hookdedup ") {
		t.Fatalf("version: %d %s", code, out)
	}
	s.stop(t)

	log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
	for _, secret := range []string{"new-secret", "old-secret", "correct horse"} {
		if strings.Contains(string(log), secret) {
			t.Errorf("the log shows a secret (%q)", secret)
		}
	}
}
