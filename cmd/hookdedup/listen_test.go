package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// openSource is a source that checks no signature, so that a test can deliver to it
// with a bare POST.
const openSource = `
[[source]]
name      = "open"
signature = "none"
event_id  = "/id"
`

// served is serve running in-process on 127.0.0.1 ports of the system's choosing.
type served struct {
	p              *program
	stdout, stderr *lockedBuffer
	stop           func() // stops serve and waits for run to return; idempotent
}

// runServeInProcess runs serve in-process with a config file holding toml, the environment
// vars and the flags args, on a database of its own, until the test ends or stop.
func runServeInProcess(t *testing.T, toml string, vars map[string]string, args ...string) *served {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &served{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}}
	e := env{getenv: func(k string) string { return vars[k] }, stdin: strings.NewReader(""), stdout: s.stdout, stderr: s.stderr}
	flags := newFlags("serve", e)
	if _, err := flags.parse(append([]string{"--config", path, "--database", filepath.Join(dir, "hookdedup.db")}, args...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := flags.load(e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if s.p, err = openProgram(ctx, cfg, e); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.p.run(ctx) }()
	stopped := false
	s.stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30s of its context ending")
		}
		s.p.close()
	}
	t.Cleanup(s.stop)
	return s
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

// call sends one request and returns the response, its body read.
func call(t *testing.T, method, url, bearer, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// expect checks that method url answers code, with a body containing want.
func expect(t *testing.T, method, url, bearer string, code int, want string) {
	t.Helper()
	body := ""
	if method == http.MethodPost {
		body = `{"id":"evt-` + strings.ReplaceAll(url, "/", "_") + `"}`
	}
	resp, got := call(t, method, url, bearer, body)
	if resp.StatusCode != code || !strings.Contains(got, want) {
		t.Errorf("%s %s: %s %q, want %d and a body containing %q", method, url, resp.Status, got, code, want)
	}
}

// expectJSONNotFound checks that method url answers the JSON 404 of an address that
// does not serve it, and nothing of the console's HTML.
func expectJSONNotFound(t *testing.T, method, url, bearer string) {
	t.Helper()
	resp, got := call(t, method, url, bearer, "")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" || got != `{"error":"not found"}`+"\n" {
		t.Errorf("%s %s: %s, Content-Type %q, body %q; want 404 application/json {\"error\":\"not found\"}",
			method, url, resp.Status, resp.Header.Get("Content-Type"), got)
	}
}

// expectNoSource checks that paths under /webhooks of the address base that name no
// source, or are not in their clean form, get the receiver's JSON 404 naming what was
// asked for, the console's page or a redirect never, and that each POST is counted as a
// rejection.
func expectNoSource(t *testing.T, s *served, base string) {
	t.Helper()
	ctx := context.Background()
	before, err := storagetest.CountDeliveries(ctx, s.p.db, "")
	if err != nil {
		t.Fatal(err)
	}
	posts := 0
	for _, method := range []string{"POST", "GET"} {
		for _, path := range []string{"/webhooks/open/", "/webhooks/open/extra", "/webhooks/", "/webhooks"} {
			resp, got := call(t, method, base+path, "", "")
			if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" ||
				!strings.Contains(got, `"error":"unknown source`) {
				t.Errorf("%s %s: %s, Content-Type %q, body %q; want 404 and a JSON error naming an unknown source",
					method, path, resp.Status, resp.Header.Get("Content-Type"), got)
			}
			if method == "POST" {
				posts++
			}
		}
	}
	after, err := storagetest.CountDeliveries(ctx, s.p.db, "")
	if err != nil {
		t.Fatal(err)
	}
	if after.Rejected-before.Rejected != int64(posts) || after.Accepted != before.Accepted {
		t.Errorf("counts went from %+v to %+v; want the %d POSTs as rejections", before, after, posts)
	}
	// Paths that clean to a source's are no source's either: an http.ServeMux would
	// redirect them there. (Past the sample of five a minute an address's unknown
	// sources are counted, not stored: only what was accepted is compared.)
	for _, path := range []string{"/webhooks//open", "/webhooks/./open", "//webhooks/open", "/webhooks/x/../open", "/webhooks/open/."} {
		resp, got := call(t, "POST", base+path, "", `{"id":"unclean"}`)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" ||
			!strings.Contains(got, `"error":"unknown source`) {
			t.Errorf("POST %s: %s, Content-Type %q, body %q; want 404 and a JSON error naming an unknown source",
				path, resp.Status, resp.Header.Get("Content-Type"), got)
		}
	}
	if end, err := storagetest.CountDeliveries(ctx, s.p.db, ""); err != nil || end.Accepted != after.Accepted {
		t.Errorf("counts went from %+v to %+v (%v); want nothing accepted through a path not in its clean form", after, end, err)
	}
}

// apiToken makes a bearer token of the JSON API for the first admin.
func apiToken(t *testing.T, s *served) string {
	t.Helper()
	token, _, err := s.p.db.CreateToken(context.Background(), "admin", "test", "test")
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestServe_ConsoleAddr: with console_addr set, the public address answers webhooks,
// their 405s, health and readiness, and a JSON 404 for everything of the console, the
// API, /metrics and the static files; the console address serves those, and health.
func TestServe_ConsoleAddr(t *testing.T) {
	s := runServeInProcess(t, `addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
`+openSource, nil)
	if s.p.console == nil {
		t.Fatal("console_addr is set but serve made no console address")
	}
	pub, con := s.p.public.url(), s.p.console.url()
	if pub == con {
		t.Fatalf("the public and the console address are both %s", pub)
	}
	token := apiToken(t, s)

	t.Run("Public", func(t *testing.T) {
		expect(t, "POST", pub+"/webhooks/open", "", http.StatusOK, `"status":"accepted"`)
		expect(t, "GET", pub+"/webhooks/open", "", http.StatusMethodNotAllowed, `"error":"method GET is not allowed`)
		expect(t, "GET", pub+"/healthz", "", http.StatusOK, `"status":"ok"`)
		expect(t, "GET", pub+"/readyz", "", http.StatusOK, `"status":"ready"`)
		for _, path := range []string{"/", "/login", "/events", "/events/1", "/keys", "/lab", "/users", "/sources",
			"/api/v1/keys", "/api/v1/deliveries", "/metrics", "/static/style.css", "/static/app.js", "/no/such"} {
			// The API's and the metrics' credentials open nothing here either.
			expectJSONNotFound(t, "GET", pub+path, token)
		}
		expectJSONNotFound(t, "POST", pub+"/login", "")
		expectJSONNotFound(t, "POST", pub+"/api/v1/release", token)
		expectNoSource(t, s, pub)
	})

	t.Run("Console", func(t *testing.T) {
		expect(t, "GET", con+"/login", "", http.StatusOK, "<form")
		resp, _ := call(t, "GET", con+"/", "", "")
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || !strings.HasPrefix(loc, "/login") {
			t.Errorf("GET %s/: %s to %q, want a redirect to the sign-in page", con, resp.Status, loc)
		}
		expect(t, "GET", con+"/static/style.css", "", http.StatusOK, "")
		expect(t, "GET", con+"/api/v1/keys", token, http.StatusOK, `"keys"`)
		expect(t, "GET", con+"/api/v1/keys", "", http.StatusUnauthorized, "")
		expect(t, "GET", con+"/metrics", "", http.StatusOK, `hookdedup_deliveries_total{outcome="accepted",source="open"} 1`)
		expect(t, "GET", con+"/healthz", "", http.StatusOK, `"status":"ok"`)
		expect(t, "GET", con+"/readyz", "", http.StatusOK, `"status":"ready"`)
		// Providers are given the public address; the private one takes no delivery.
		expect(t, "POST", con+"/webhooks/open", "", http.StatusNotFound, "")
	})

	s.stop()
	if out := s.stdout.String(); !strings.Contains(out, "hookdedup listening on "+pub+"\n") || !strings.Contains(out, "hookdedup console on "+con+"\n") {
		t.Errorf("stdout %q: want the listening line and the console's", out)
	}
	if log := s.stderr.String(); !strings.Contains(log, "console_addr="+strings.TrimPrefix(con, "http://")) {
		t.Errorf("the serving line does not name the console address:\n%s", log)
	}
}

// TestServe_ConsoleAddrBelievesNoProxy: with a proxy on the same machine trusted for
// addr (trusted_proxies = 127.0.0.1/32, as the README sets it) and the console on
// console_addr reached through an SSH tunnel, whose connections come from 127.0.0.1
// too: a page in the user's browser rebound to 127.0.0.1 is refused for its name on
// every route of the console address, and the client addresses it writes in
// X-Forwarded-For are not believed, so its guesses are throttled as one address's.
// (TestEndToEnd_TrustedProxies has addr believe the proxy.)
func TestServe_ConsoleAddrBelievesNoProxy(t *testing.T) {
	s := runServeInProcess(t, `addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
trusted_proxies = ["127.0.0.1/32"]
`+openSource, nil)
	con := s.p.console.url()
	send := func(method, path, host, xff string) int {
		t.Helper()
		form := "username=admin&password=guess"
		req, _ := http.NewRequest(method, con+path, strings.NewReader(form))
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/login", "/metrics"} {
		if code := send(http.MethodGet, path, "attacker.example:8081", "203.0.113.9"); code != http.StatusMisdirectedRequest {
			t.Errorf("GET %s as attacker.example through the tunnel: %d, want 421", path, code)
		}
	}
	if code := send(http.MethodPost, "/login", "attacker.example:8081", "203.0.113.9"); code != http.StatusMisdirectedRequest {
		t.Errorf("a sign-in as attacker.example through the tunnel: %d, want 421", code)
	}
	throttled := false
	for i := range 10 {
		if code := send(http.MethodPost, "/login", "127.0.0.1", fmt.Sprintf("198.51.100.%d", i+1)); code == http.StatusTooManyRequests {
			throttled = true
			break
		}
	}
	if !throttled {
		t.Error("10 wrong passwords for admin on console_addr, each naming another X-Forwarded-For: never 429")
	}
}

// TestServe_SharedAddr: without console_addr everything is on the one address, as
// before, except /metrics, which is off there without a metrics token.
func TestServe_SharedAddr(t *testing.T) {
	s := runServeInProcess(t, `addr = "127.0.0.1:0"`+"\n"+openSource, nil)
	if s.p.console != nil {
		t.Fatal("no console_addr, yet serve made a console address")
	}
	base := s.p.public.url()
	token := apiToken(t, s)
	expect(t, "POST", base+"/webhooks/open", "", http.StatusOK, `"status":"accepted"`)
	expect(t, "GET", base+"/webhooks/open", "", http.StatusMethodNotAllowed, `"error":"method GET is not allowed`)
	expect(t, "GET", base+"/healthz", "", http.StatusOK, `"status":"ok"`)
	expect(t, "GET", base+"/readyz", "", http.StatusOK, `"status":"ready"`)
	expect(t, "GET", base+"/login", "", http.StatusOK, "<form")
	expect(t, "GET", base+"/static/style.css", "", http.StatusOK, "")
	expect(t, "GET", base+"/api/v1/keys", token, http.StatusOK, `"keys"`)
	expectJSONNotFound(t, "GET", base+"/metrics", "")
	expectJSONNotFound(t, "GET", base+"/metrics", token) // an API token is no metrics token
	expectNoSource(t, s, base)

	s.stop()
	if out := s.stdout.String(); strings.Contains(out, "console on") {
		t.Errorf("stdout %q names a console address of its own", out)
	}
	if log := s.stderr.String(); !strings.Contains(log, `metrics="off (set metrics_token or console_addr)"`) {
		t.Errorf("the serving line does not say /metrics is off:\n%s", log)
	}
}

// TestServe_MetricsToken: with metrics_token set, /metrics answers only its bearer, on
// a shared address and on the console address; the token is never logged or printed.
func TestServe_MetricsToken(t *testing.T) {
	const secret = "m3tr1cs-T0KEN-4f9d2a7c1e"
	check := func(t *testing.T, url string) {
		t.Helper()
		for _, c := range []struct{ name, header string }{
			{"None", ""},
			{"Wrong", "Bearer m3tr1cs-T0KEN-4f9d2a7c1X"},
			{"Prefix", "Bearer " + secret[:len(secret)-1]},
			{"Longer", "Bearer " + secret + "x"},
			{"Basic", "Basic " + secret},
			{"Bare", secret},
		} {
			req, _ := http.NewRequest("GET", url, nil)
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			resp, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
				!strings.Contains(string(b), `"error":"missing or wrong bearer token`) {
				t.Errorf("%s: %s, WWW-Authenticate %q, %q; want 401 asking for a bearer token", c.name, resp.Status, resp.Header.Get("WWW-Authenticate"), b)
			}
		}
		expect(t, "GET", url, secret, http.StatusOK, `hookdedup_deliveries_total{outcome="accepted",source="open"} 1`)
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "bearer "+secret) // the scheme's name is case-insensitive
		if resp, err := noRedirects.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("lower-case bearer: %v %v, want 200", resp, err)
		} else {
			resp.Body.Close()
		}
	}
	noLeak := func(t *testing.T, s *served) {
		t.Helper()
		if strings.Contains(s.stderr.String(), secret) || strings.Contains(s.stdout.String(), secret) {
			t.Errorf("the metrics token was logged or printed:\n%s\n%s", s.stdout.String(), s.stderr.String())
		}
	}

	t.Run("Shared", func(t *testing.T) {
		s := runServeInProcess(t, `addr = "127.0.0.1:0"`+"\n"+openSource, map[string]string{"HOOKDEDUP_METRICS_TOKEN": secret})
		base := s.p.public.url()
		expect(t, "POST", base+"/webhooks/open", "", http.StatusOK, `"status":"accepted"`)
		check(t, base+"/metrics")
		s.stop()
		if log := s.stderr.String(); !strings.Contains(log, `metrics="bearer token"`) {
			t.Errorf("the serving line does not say /metrics needs a bearer token:\n%s", log)
		}
		noLeak(t, s)
	})
	t.Run("ConsoleAddr", func(t *testing.T) {
		s := runServeInProcess(t, `addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
metrics_token = "`+secret+`"
`+openSource, nil)
		expect(t, "POST", s.p.public.url()+"/webhooks/open", "", http.StatusOK, `"status":"accepted"`)
		check(t, s.p.console.url()+"/metrics")
		expectJSONNotFound(t, "GET", s.p.public.url()+"/metrics", secret)
		s.stop()
		noLeak(t, s)
	})
}

// TestServe_ExposedWarning: the console on an address other machines can reach logs one
// warning; on loopback, or with a console address of its own, none.
func TestServe_ExposedWarning(t *testing.T) {
	warning := regexp.MustCompile(`level=WARN msg="the console and the JSON API are exposed on 0\.0\.0\.0:0; set console_addr to serve them privately"`)
	for _, c := range []struct {
		name, toml string
		warn       bool
	}{
		{"AllInterfaces", `addr = "0.0.0.0:0"`, true},
		{"Loopback", `addr = "127.0.0.1:0"`, false},
		{"Localhost", `addr = "localhost:0"`, false},
		{"AllInterfacesWithConsoleAddr", `addr = "0.0.0.0:0"` + "\n" + `console_addr = "127.0.0.1:0"`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := runServeInProcess(t, c.toml+"\n", nil)
			// Reached through loopback only: the test sends nothing off this machine.
			port := s.p.public.ln.Addr().String()[strings.LastIndex(s.p.public.ln.Addr().String(), ":"):]
			expect(t, "GET", "http://127.0.0.1"+port+"/healthz", "", http.StatusOK, `"status":"ok"`)
			s.stop()
			log := s.stderr.String()
			if n := len(warning.FindAllString(log, -1)); c.warn && n != 1 {
				t.Errorf("want the exposure warning once, got it %d times:\n%s", n, log)
			}
			if !c.warn && strings.Contains(log, "exposed") {
				t.Errorf("want no exposure warning:\n%s", log)
			}
		})
	}
	// With a metrics token, /metrics is exposed too, and the warning says so.
	s := runServeInProcess(t, `addr = "0.0.0.0:0"`+"\n", map[string]string{"HOOKDEDUP_METRICS_TOKEN": "0123456789abcdef0123"})
	s.stop()
	if log := s.stderr.String(); !strings.Contains(log, `msg="the console, the JSON API and /metrics are exposed on 0.0.0.0:0; set console_addr to serve them privately"`) {
		t.Errorf("want the warning to name /metrics:\n%s", log)
	}
}

// TestServe_PublicConsoleAddrWarning: console_addr on every interface, without HTTPS and
// without a metrics token, is warned of at start, naming the setting and the open
// /metrics; on loopback it is not. (Bound to 0.0.0.0 as TestServe_ExposedWarning does;
// nothing is sent to it.)
func TestServe_PublicConsoleAddrWarning(t *testing.T) {
	const warning = `level=WARN msg="console_addr 0.0.0.0:0 serves plain HTTP on an address that is neither loopback nor private`
	for _, c := range []struct {
		console string
		warns   bool
	}{
		{"0.0.0.0:0", true},
		{"127.0.0.1:0", false},
	} {
		t.Run(c.console, func(t *testing.T) {
			s := runServeInProcess(t, "addr = \"127.0.0.1:0\"\nconsole_addr = \""+c.console+"\"\n", nil)
			s.stop()
			log := s.stderr.String()
			if got := strings.Contains(log, "neither loopback nor private"); got != c.warns {
				t.Fatalf("console_addr %s: warned %v, want %v:\n%s", c.console, got, c.warns, log)
			}
			if c.warns && (!strings.Contains(log, warning) || !strings.Contains(log, "/metrics is open there")) {
				t.Errorf("want a warning naming console_addr and /metrics:\n%s", log)
			}
		})
	}
}

// TestServe_UnsignedIDHeaderWarning: a timestamped scheme's source keyed on a header its
// signature leaves out logs one warning, naming the source and the id the signature
// covers; keyed on the scheme's own id, or under a scheme that signs no time, none.
func TestServe_UnsignedIDHeaderWarning(t *testing.T) {
	const swSecret = `secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`
	for _, c := range []struct {
		name, source, want string
	}{
		{"StripeHeader", "signature = \"stripe\"\nsecret = \"x\"\nevent_id = \"header:X-Request-Id\"",
			`source \"ota\": event_id \"header:X-Request-Id\" is a header the stripe signature does not cover: a captured delivery sent again within the tolerance under another id is taken as a new event; leave event_id out to key on \"/id\", which it covers`},
		{"StandardWebhooksOtherHeader", "signature = \"standard-webhooks\"\n" + swSecret + "\nevent_id = \"header:X-Event-Id\"",
			`leave event_id out to key on \"header:webhook-id\"`},
		{"StandardWebhooksOwnHeader", "signature = \"standard-webhooks\"\n" + swSecret + "\nevent_id = \"header:Svix-Id\"", ""},
		{"StripeBody", "signature = \"stripe\"\nsecret = \"x\"\nevent_id = \"/data/object/id\"", ""},
		{"GitHubHeader", "signature = \"github\"\nsecret = \"x\"", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := runServeInProcess(t, "addr = \"127.0.0.1:0\"\n[[source]]\nname = \"ota\"\n"+c.source+"\n", nil)
			s.stop()
			log := s.stderr.String()
			n := strings.Count(log, "signature does not cover")
			switch {
			case c.want == "" && n != 0:
				t.Errorf("want no warning:\n%s", log)
			case c.want != "" && (n != 1 || !strings.Contains(log, c.want)):
				t.Errorf("want the warning once, with %s:\n%s", c.want, log)
			}
		})
	}
}

// TestConfig_Listen: console_addr and metrics_token come from the file, the environment
// and flags, in that order of precedence; bad values are refused with errors that name
// the setting and never show the token.
func TestConfig_Listen(t *testing.T) {
	load := func(toml string, vars map[string]string, args ...string) (config, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "h.toml")
		if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		e := env{getenv: func(k string) string { return vars[k] }, stderr: &bytes.Buffer{}}
		f := newFlags("serve", e)
		if _, err := f.parse(append([]string{"--config", path}, args...)); err != nil {
			t.Fatal(err)
		}
		return f.load(e)
	}
	const fileToken, envToken, flagToken = "file-token-0123456789", "env-token-0123456789", "flag-token-0123456789"
	file := "console_addr = \"127.0.0.1:9001\"\nmetrics_token = \"" + fileToken + "\"\n"
	for _, c := range []struct {
		name          string
		vars          map[string]string
		args          []string
		console, want string
	}{
		{"Defaults", nil, nil, "", ""},
		{"File", nil, nil, "127.0.0.1:9001", fileToken},
		{"Environment", map[string]string{"HOOKDEDUP_CONSOLE_ADDR": "127.0.0.1:9002", "HOOKDEDUP_METRICS_TOKEN": envToken}, nil, "127.0.0.1:9002", envToken},
		{"Flags", map[string]string{"HOOKDEDUP_CONSOLE_ADDR": "127.0.0.1:9002", "HOOKDEDUP_METRICS_TOKEN": envToken},
			[]string{"--console-addr", "10.8.0.1:9003", "--metrics-token", flagToken}, "10.8.0.1:9003", flagToken},
	} {
		t.Run(c.name, func(t *testing.T) {
			toml := file
			if c.name == "Defaults" {
				toml = ""
			}
			cfg, err := load(toml, c.vars, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ConsoleAddr != c.console || cfg.MetricsToken != c.want {
				t.Errorf("console_addr %q, metrics_token %q; want %q, %q", cfg.ConsoleAddr, cfg.MetricsToken, c.console, c.want)
			}
		})
	}

	for _, c := range []struct {
		name, toml string
		vars       map[string]string
		args       []string
		want       string
	}{
		{"ShortTokenInFile", `metrics_token = "short-secret"`, nil, nil, "metrics_token: is 12 characters long, fewer than 16"},
		{"ShortTokenInEnv", "", map[string]string{"HOOKDEDUP_METRICS_TOKEN": "short-secret"}, nil, "HOOKDEDUP_METRICS_TOKEN: is 12 characters long"},
		{"ShortTokenAsFlag", "", nil, []string{"--metrics-token", "short-secret"}, "--metrics-token: is 12 characters long"},
		{"SpaceInToken", `metrics_token = "short-secret with a space"`, nil, nil, "metrics_token: holds a space"},
		{"NonASCIIToken", `metrics_token = "short-secret-ünïcödé"`, nil, nil, "metrics_token: holds a space, a control character or a character beyond ASCII"},
		{"SameAddress", "addr = \"127.0.0.1:8080\"\nconsole_addr = \"127.0.0.1:8080\"", nil, nil, `console_addr "127.0.0.1:8080" is the same as addr`},
		{"SameAddressOnEveryInterface", "addr = \":8080\"\nconsole_addr = \"0.0.0.0:8080\"", nil, nil, `console_addr "0.0.0.0:8080" is the same as addr`},
		{"NotHostPort", `console_addr = "8081"`, nil, nil, `console_addr "8081" is not host:port`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(c.toml, c.vars, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), "short-secret") {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

// TestServe_ExposedThroughProxyWarning: the console on a loopback addr that a reverse
// proxy publishes (trusted_proxies set) is as exposed as on a public address, and more:
// every request from the proxy's address passes for the proxy's, a browser's through an
// SSH tunnel too. It is warned of once; with a console address of its own, not.
func TestServe_ExposedThroughProxyWarning(t *testing.T) {
	const warning = `level=WARN msg="the console and the JSON API are exposed on 127.0.0.1:0 through the reverse proxies of trusted_proxies`
	for _, c := range []struct {
		name, toml string
		warn       bool
	}{
		{"Proxied", `addr = "127.0.0.1:0"` + "\n" + `trusted_proxies = ["127.0.0.1/32"]`, true},
		{"ProxiedWithConsoleAddr", `addr = "127.0.0.1:0"` + "\n" + `trusted_proxies = ["127.0.0.1/32"]` + "\n" + `console_addr = "127.0.0.1:0"`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := runServeInProcess(t, c.toml+"\n", nil)
			s.stop()
			log := s.stderr.String()
			if n := strings.Count(log, warning); c.warn && n != 1 {
				t.Errorf("want the exposure warning once, got it %d times:\n%s", n, log)
			}
			if !c.warn && strings.Contains(log, "exposed") {
				t.Errorf("want no exposure warning:\n%s", log)
			}
		})
	}
}
