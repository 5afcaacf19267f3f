package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
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

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain runs main when this test binary was started under the name hookdedup (see
// hookdedupBinary), and the tests otherwise; then it removes the binary's directory.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "hookdedup" {
		main()
		os.Exit(0)
	}
	// Most tests here wait on child processes, timers and locks rather than on the CPU:
	// run more of them at once than there are cores, unless -parallel says otherwise.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", "4")
	}
	code := postgrestest.Run(m, nil) // and then stops the PostgreSQL cluster, if a test started one
	if binPath != "" && buildErr == nil {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// hookdedupBinary returns the path of a hookdedup binary, made once per test run. It is
// this test binary under the name hookdedup, which TestMain turns into main: the same
// code, without a link of its own, which takes seconds on a busy machine. Under the race
// detector, and for the load harness, it is a binary built as `make build` builds it, so
// that serve runs at its real speed (buildBinary).
func hookdedupBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hookdedup-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "hookdedup")
		if !buildBinary {
			self, err := os.Executable()
			if err == nil {
				err = os.Symlink(self, binPath)
			}
			buildErr = err
			return
		}
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

// startServe starts the binary in dir with args and waits until it listens; its log is
// dir/serve.log.
func startServe(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	return startLogged(t, dir, "serve.log", env, args...)
}

// startLogged is startServe with stderr kept in dir/logName, so that each process's log
// survives (the crash test checks every incarnation's for panics). It waits up to 60 s
// for the listening line, and keeps the admin password if one is printed.
func startLogged(t *testing.T, dir, logName string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(hookdedupBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, logName)
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close() // the child holds its own copy
	s := &server{cmd: cmd, exited: make(chan error, 1)}
	type line struct{ url, password string }
	lines := make(chan line, 2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if pw, ok := strings.CutPrefix(sc.Text(), "created user admin with one-time password: "); ok {
				lines <- line{password: pw}
			}
			if u, ok := strings.CutPrefix(sc.Text(), "hookdedup listening on "); ok {
				lines <- line{url: u}
			}
		}
		close(lines)
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("%s:\n%s", logName, log)
		}
	})
	timeout := time.After(60 * time.Second)
	for s.url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				log, _ := os.ReadFile(logPath)
				t.Fatalf("serve exited before listening:\n%s", log)
			}
			if l.password != "" {
				s.password = l.password
			}
			s.url = l.url
		case <-timeout:
			t.Fatal("serve did not listen within 60s")
		}
	}
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

// testSecret is the secret of the standard-webhooks sources these tests configure.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// standardWebhooks is the verifier of a standard-webhooks source with secret: its Sign
// signs a delivery as the provider would.
func standardWebhooks(t testing.TB, secret string) signature.Verifier {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "standard-webhooks", Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// signedRequest is a provider's delivery: body POSTed to /webhooks/source on the server
// at base, as JSON, with webhook-id id (none if id is ""), signed by v now.
func signedRequest(v signature.Verifier, base, source, id string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/"+source, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("webhook-id", id)
	}
	if err := v.Sign(req.Header, nil, body, time.Now()); err != nil {
		return nil, err
	}
	return req, nil
}

// hmacSignature is the X-Signature an hmac-sha256 provider sends with body, written out
// here rather than through package signature, so that the server is checked against
// the provider's recipe.
func hmacSignature(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
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

// devFull opens /dev/full, where every write fails as on a full disk (ENOSPC), for a
// command's stdout; the test is skipped where there is none.
func devFull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestEndToEnd_ZeroConfigDemo(t *testing.T) {
	t.Parallel() // its own serve processes, files and ports
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

	db, err := sqlite.Open(filepath.Join(dir, "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := storagetest.CountDeliveries(context.Background(), db, "ota")
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
	t.Parallel() // its own serve processes, files and ports
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(e2eConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CM_SECRET=new-secret,old-secret"}
	s := startServe(t, dir, env)

	send := func(secret, body string) (int, map[string]string) {
		req, _ := http.NewRequest("POST", s.url+"/webhooks/channel-manager", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Signature", hmacSignature(secret, body))
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
	if out, code := cli(t, dir, env, "short\n", "user", "add", "sam", "--role", "viewer"); code == 0 || !strings.Contains(out, "at least 12") {
		t.Fatalf("user add with a short password: %d %s", code, out)
	}
	// user list, role, password and remove, while serve runs; each change is audited
	// as cli:<login name>, and the last admin stays one.
	if out, code := cli(t, dir, env, "", "user", "list"); code != 0 || !regexp.MustCompile(`(?m)^rita\s+operator\s`).MatchString(out) {
		t.Fatalf("user list: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "user", "role", "rita", "admin"); code != 0 || !strings.Contains(out, "rita: operator -> admin") {
		t.Fatalf("user role: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "user", "role", "rita", "root"); code == 0 || !strings.Contains(out, `role "root"`) {
		t.Fatalf("user role with an unknown role: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "a brand new password\n", "user", "password", "rita"); code != 0 || !strings.Contains(out, "new password set for rita") {
		t.Fatalf("user password: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "user", "remove", "nobody"); code != 1 || !strings.Contains(out, `no user "nobody"`) {
		t.Fatalf("user remove of an unknown user: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "user", "remove", "admin"); code != 0 || !strings.Contains(out, "removed user admin") {
		t.Fatalf("user remove: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "user", "remove", "rita"); code != 1 || !strings.Contains(out, "rita is the only admin") {
		t.Fatalf("user remove of the last admin: %d %s", code, out)
	}
	if out, code := cli(t, dir, env, "", "user", "rename", "rita"); code != 1 || !strings.Contains(out, "usage: hookdedup user") {
		t.Fatalf("user with an unknown subcommand: %d %s", code, out)
	}
	{
		db, err := sqlite.Open(filepath.Join(dir, "hookdedup.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		log, err := db.AuditLog(context.Background(), 0, 4)
		db.Close()
		if err != nil || len(log) != 4 {
			t.Fatalf("audit log: %v %v", log, err)
		}
		for i, want := range []string{"remove user admin", "set password rita", "change role rita to admin", "add user rita as operator"} {
			if got := log[i].Action + " " + log[i].Reason; got != want || !strings.HasPrefix(log[i].Actor, "cli") {
				t.Errorf("audit row %d: %s %q, want cli… %q", i, log[i].Actor, got, want)
			}
		}
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

// eventSink is the downstream: a real server on a fixed loopback port that the test
// can take down and bring back.
type eventSink struct {
	addr string
	mu   sync.Mutex
	got  map[string]int // Idempotency-Key -> deliveries
	srv  *http.Server
}

func newEventSink(t *testing.T) *eventSink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down until up() is called
	return &eventSink{addr: addr, got: map[string]int{}}
}

func (s *eventSink) up(t *testing.T) {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.got[r.Header.Get("Idempotency-Key")]++
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
}

func (s *eventSink) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.got)
}

func TestEndToEnd_RestartLosesNothing(t *testing.T) {
	t.Parallel() // its own serve processes, files and ports
	dir := t.TempDir()
	sink := newEventSink(t)
	cfg := fmt.Sprintf(`
stuck_after = "1s"
[[source]]
name = "ota"
signature = "standard-webhooks"
secret = %q
forward_url = "http://%s/events"
max_attempts = 1000
attempt_timeout = "1s"
max_backoff = "1s"
`, testSecret, sink.addr)
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	v := standardWebhooks(t, testSecret)
	send := func(url, id string) string {
		req, err := signedRequest(v, url, "ota", id, fmt.Appendf(nil, `{"booking_id":%q,"status":"cancelled"}`, id))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a map[string]string
		json.NewDecoder(resp.Body).Decode(&a)
		if resp.StatusCode != 200 {
			t.Fatalf("delivery %s: %d %v", id, resp.StatusCode, a)
		}
		return a["status"]
	}

	s := startServe(t, dir, nil)
	want := map[string]int{}
	for i := range 20 {
		id := fmt.Sprintf("evt_%02d", i)
		if st := send(s.url, id); st != "accepted" {
			t.Fatalf("%s: %s", id, st)
		}
		want["ota:"+id] = 1
		if i%4 == 0 {
			if st := send(s.url, id); st != "duplicate" {
				t.Fatalf("%s again: %s", id, st)
			}
		}
	}
	// Attempts fail against the closed port; after stuck_after the keys are stuck.
	storagetest.Eventually(t, 30*time.Second, func() error {
		out, code := cli(t, dir, nil, "", "keys", "--stuck")
		if code != 0 || !strings.Contains(out, "evt_00") || !strings.Contains(out, "connection refused") {
			return fmt.Errorf("keys --stuck: %d\n%s", code, out)
		}
		return nil
	})
	s.cmd.Process.Kill() // no chance to clean up
	<-s.exited

	s = startServe(t, dir, nil)
	for i := 20; i < 25; i++ {
		id := fmt.Sprintf("evt_%02d", i)
		send(s.url, id)
		want["ota:"+id] = 1
	}
	sink.up(t)
	storagetest.Eventually(t, 30*time.Second, func() error {
		if got := sink.snapshot(); len(got) < len(want) {
			return fmt.Errorf("downstream got %d keys %v, want %d", len(got), got, len(want))
		}
		return nil
	})
	if got := sink.snapshot(); !maps.Equal(got, want) {
		t.Fatalf("downstream got %d keys %v, want each of %d once", len(got), got, len(want))
	}

	// Reprocess one through the CLI: it is handed off again, with the same key.
	if out, code := cli(t, dir, nil, "", "release", "--source", "ota", "evt_03", "--reason", "PMS lost it", "--reprocess"); code != 0 {
		t.Fatalf("reprocess: %d %s", code, out)
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		if n := sink.snapshot()["ota:evt_03"]; n < 2 {
			return fmt.Errorf("after reprocess evt_03 reached the downstream %d times, want 2", n)
		}
		return nil
	})
	if n := sink.snapshot()["ota:evt_03"]; n != 2 {
		t.Fatalf("after reprocess evt_03 reached the downstream %d times, want 2", n)
	}
	s.stop(t)
	db, err := sqlite.Open(filepath.Join(dir, "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The reprocess, and before it the admin that the first start created.
	audit, err := db.AuditLog(context.Background(), 0, 10)
	if err != nil || len(audit) != 2 || audit[0].Action != "reprocess" || audit[0].Reason != "PMS lost it" || !strings.HasPrefix(audit[0].Actor, "cli") ||
		audit[1].Action != "add user" || audit[1].Reason != "admin as admin" || audit[1].Actor != "serve (first start)" {
		t.Fatalf("audit = %+v, %v", audit, err)
	}
}

// TestEndToEnd_SecondServeOnOneFileRefused: a second serve process on a database file
// that a serve runs on exits 1 before it listens, naming the database and the pid that
// serves it, and the first serves on: a delivery sent to it is accepted once.
func TestEndToEnd_SecondServeOnOneFileRefused(t *testing.T) {
	t.Parallel() // its own serve processes, files and ports
	dir := t.TempDir()
	cfg := fmt.Sprintf("[[source]]\nname = \"ota\"\nsignature = \"standard-webhooks\"\nsecret = %q\n", testSecret)
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startServe(t, dir, nil)
	second := exec.Command(hookdedupBinary(t), "serve", "--addr", "127.0.0.1:0")
	second.Dir = dir
	out, err := second.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second serve on the same file: %v, want exit 1\n%s", err, out)
	}
	want := fmt.Sprintf("another hookdedup serve (pid %d) is running on hookdedup.db (it holds hookdedup.db.serve-lock)", a.cmd.Process.Pid)
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "listening") {
		t.Errorf("second serve's output:\n%s\nwant %q, and no listening line", out, want)
	}

	v := standardWebhooks(t, testSecret)
	body := []byte(`{"booking_id":"BK-7","status":"cancelled"}`)
	for _, status := range []string{"accepted", "duplicate"} {
		h := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {"msg_both"}}
		v.Sign(h, nil, body, time.Now())
		req, _ := http.NewRequest("POST", a.url+"/webhooks/ota", bytes.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var ans map[string]string
		json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || ans["status"] != status {
			t.Errorf("delivery to the first serve: %d %v, want 200 %s", resp.StatusCode, ans, status)
		}
	}
	a.stop(t)
}
