package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
)

// defaultProgram builds serve on the defaults (no config file: the ota source, the first
// admin) in a temp dir, without running it, and returns it with its configuration, its
// environment and what it printed. The caller closes it.
func defaultProgram(t *testing.T, ctx context.Context) (*program, config, env, *lockedBuffer) {
	t.Helper()
	dir := t.TempDir()
	getenv := func(string) string { return "" }
	cfg, err := loadConfig(filepath.Join(dir, "none.toml"), false, getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Database = filepath.Join(dir, "hookdedup.db")
	var stdout, stderr lockedBuffer
	e := env{getenv: getenv, stdout: &stdout, stderr: &stderr}
	p, err := openProgram(ctx, cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	return p, cfg, e, &stdout
}

// startProgram builds serve on the defaults (defaultProgram) and runs it until the test
// ends. It returns the program, its base URL and what it printed.
func startProgram(t *testing.T) (*program, string, *lockedBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, _, _, stdout := defaultProgram(t, ctx)
	done := make(chan error, 1)
	go func() { done <- p.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30s of its context ending")
		}
		p.close()
	})
	return p, p.public.url(), stdout
}

// consoleClient signs in to the console at base and returns a client that does not
// follow redirects, with the sign-in's answer.
func consoleClient(t *testing.T, base, name, password string) (*http.Client, *http.Response) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"username": {name}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c, resp
}

// TestServe_FirstAdminChoosesPassword: the admin that serve creates signs in with the
// printed password and is sent to choose their own before any page.
func TestServe_FirstAdminChoosesPassword(t *testing.T) {
	_, base, stdout := startProgram(t)
	var printed string
	for line := range strings.Lines(stdout.String()) {
		if pw, ok := strings.CutPrefix(strings.TrimSpace(line), "created user admin with one-time password: "); ok {
			printed = pw
		}
	}
	if printed == "" {
		t.Fatalf("no password printed: %q", stdout.String())
	}
	c, resp := consoleClient(t, base, "admin", printed)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in with the printed password: %s", resp.Status)
	}
	resp, err := c.Get(base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/account/password?next=%2Fevents" {
		t.Fatalf("GET /events as the first admin: %s %q, want the password page", resp.Status, resp.Header.Get("Location"))
	}
}

// TestServe_ClockWarning: deliveries signed two minutes ahead of this machine's clock
// reach the dashboard's warning through serve's wiring.
func TestServe_ClockWarning(t *testing.T) {
	p, base, _ := startProgram(t)
	ctx := context.Background()
	for _, id := range []string{"msg_1", "msg_2", "msg_3"} {
		body := `{"property_id":"P-1","booking_id":"` + id + `","status":"confirmed"}`
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/ota", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		if err := p.sources[0].Verifier.Sign(req.Header, url.Values{}, []byte(body), time.Now().Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("delivery signed 2 min ahead: %s", resp.Status)
		}
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("the viewer's password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.db.CreateUser(ctx, storage.User{Name: "vic", Role: storage.RoleViewer, PasswordHash: string(hash)}, "test"); err != nil {
		t.Fatal(err)
	}
	c, resp := consoleClient(t, base, "vic", "the viewer's password")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %s", resp.Status)
	}
	resp, err = c.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `data-testid="clock-warning"`) ||
		!strings.Contains(string(page), "behind the senders") {
		t.Fatalf("dashboard: %s, want the clock warning:\n%s", resp.Status, page)
	}
}

// A first start that cannot listen (the port taken, a typo in addr) must not spend the
// first admin's one-time password: it would be printed beside the error, and the start
// that then serves would print none, leaving no one able to sign in.
func TestServe_FirstAdminOnlyOnceListening(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "hookdedup.db")
	var out, errb lockedBuffer
	getenv := func(string) string { return "" }
	err = run(context.Background(), []string{"serve", "--database", db, "--addr", taken.Addr().String()},
		getenv, strings.NewReader(""), &out, &errb)
	if err == nil {
		t.Fatal("serve started on a port already taken")
	}
	if strings.Contains(out.String(), "one-time password") {
		t.Errorf("a start that failed (%v) printed the first admin's password: %q", err, out.String())
	}
	var list lockedBuffer
	if err := run(context.Background(), []string{"user", "list", "--database", db}, getenv, strings.NewReader(""), &list, &errb); err == nil &&
		strings.Contains(list.String(), "admin") {
		t.Errorf("a start that failed created the first admin:\n%s", list.String())
	}
}

// TestServe_OneTimePasswordUnprintedIsLogged: when the first admin's one-time password
// cannot be printed (stdout on a full disk), serve still starts, and its log says so,
// without the password, and names the command that sets one: no later start prints a
// password, as a user then exists.
func TestServe_OneTimePasswordUnprintedIsLogged(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(hookdedupBinary(t), "serve", "--addr", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = devFull(t), logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var log []byte
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !bytes.Contains(log, []byte("msg=serving")); {
		time.Sleep(100 * time.Millisecond)
		log, _ = os.ReadFile(logPath)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	log, _ = os.ReadFile(logPath)
	if !bytes.Contains(log, []byte("msg=serving")) {
		t.Fatalf("serve did not start:\n%s", log)
	}
	if !bytes.Contains(log, []byte("level=WARN")) || !bytes.Contains(log, []byte("one-time password could not be printed")) ||
		!bytes.Contains(log, []byte("hookdedup user password admin")) {
		t.Errorf("serve's log does not say that the admin's password could not be printed, and how to set one:\n%s", log)
	}
	if bytes.Contains(log, []byte("one-time password:")) {
		t.Errorf("serve's log shows the password:\n%s", log)
	}
}
