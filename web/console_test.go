package web_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/net/html"

	"github.com/hookdedup/hookdedup/static"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
)

const (
	consoleSecret   = "whsec_THIS-SECRET-MUST-NEVER-BE-RENDERED"
	consolePassword = "correct horse battery"
)

// consoleEnv is the console on a real database, with one user per role and data that
// covers every page: a mismatched duplicate cancellation, a payload with a <script>, a
// failed key with an attempt.
type consoleEnv struct {
	db      *sqlite.DB
	srv     *httptest.Server
	handler http.Handler // what srv serves: the console alone
	server  *web.Server
	clock   *storagetest.Clock
	// what was recorded
	first, dup, rejected *storage.Delivery
	failedKey            string
}

// newConsoleEnv starts the console; each of configure may change its Config first.
func newConsoleEnv(t testing.TB, configure ...func(*web.Config)) *consoleEnv {
	t.Helper()
	return newConsoleEnvOn(t, sqlite.Options{}, configure...)
}

// newConsoleEnvOn is newConsoleEnv on a database opened with opt.
func newConsoleEnvOn(t testing.TB, opt sqlite.Options, configure ...func(*web.Config)) *consoleEnv {
	t.Helper()
	ctx := context.Background()
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), opt)
	clock := storagetest.NewClock(time.Now().UTC())
	db.Now = clock.Now
	for _, role := range []string{storage.RoleViewer, storage.RoleOperator, storage.RoleAdmin} {
		storagetest.CreateUser(t, db, role, role, consolePassword)
	}
	cfg := web.Config{
		Store:      db,
		Static:     static.FS,
		Now:        clock.Now,
		BcryptCost: bcrypt.MinCost,
		Sources: []web.Source{
			{Name: "ota", Scheme: "standard-webhooks", Timestamped: true, Integrity: true, EventID: "/event_id",
				KeyFields: []string{"/property_id", "/booking_id", "/status"}, TTL: 24 * time.Hour, AmountField: []string{"/refund/amount"},
				Secrets: []web.Secret{{Masked: "whsec_••••", Origin: "generated", Revealable: true}}},
			{Name: "pms", Scheme: "token", EventID: "/event_id", TTL: time.Hour, ForwardURL: "http://127.0.0.1:9/events", MaxAttempts: 1,
				Secrets: []web.Secret{{Masked: "••••", Origin: "from environment variable PMS_TOKEN"}}},
		},
		Derive: func(source string, h http.Header, body []byte) (storage.Derivation, error) {
			return storage.Derivation{Key: "derived:abc", Method: "derived", Canonical: `{"/booking_id":"BK-1"}`, Hash: "abc",
				Fields: []storage.Field{{Pointer: "/booking_id", Present: true, Value: `"BK-1"`}}}, nil
		},
		RevealSecret: func(ctx context.Context, source string) (string, error) { return consoleSecret, nil },
	}
	for _, c := range configure {
		c(&cfg)
	}
	s, err := web.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &consoleEnv{db: db, srv: srv, handler: h, server: s, clock: clock}

	canonical := `{"/booking_id":"BK-42","/property_id":"HTL-1","/status":"cancelled"}`
	body := func(refund string) string {
		return `{"booking_id":"BK-42","property_id":"HTL-1","status":"cancelled","guest":"<script>alert('pwned')</script>","refund":{"amount":` + refund + `}}`
	}
	rec := func(d *storage.Delivery, dispatch bool) *storage.Delivery {
		t.Helper()
		if err := db.Record(ctx, d, storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: dispatch}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	cancel := func(refund, hash string) *storage.Delivery {
		return &storage.Delivery{Source: "ota", Key: "derived:9f2c", KeyMethod: "derived", KeyCanonical: canonical,
			PayloadHash: hash, Property: "HTL-1", Booking: "BK-42", EventStatus: "cancelled", Amount: refund,
			ContentType: "application/json", Body: []byte(body(refund)),
			Headers: http.Header{"Content-Type": {"application/json"}, "Webhook-Signature": {"v1,sig"}}}
	}
	e.first = rec(cancel("180.00", "h1"), false)
	e.dup = rec(cancel("190.00", "h2"), false)
	e.rejected = rec(&storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401, Error: "signature: no match"}, false)
	rec(&storage.Delivery{Source: "pms", Key: "=cmd|evil", KeyMethod: "event_id", KeyFrom: "/event_id", PayloadHash: "p",
		Booking: "=HYPERLINK(1)", Body: []byte(`{"event_id":"=cmd|evil"}`)}, true)
	e.failedKey = "=cmd|evil"
	jobs, err := db.LeaseDue(ctx, clock.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v %v", jobs, err)
	}
	if _, err := db.FinishAttempt(ctx, jobs[0], storage.Attempt{StartedAt: clock.Now(), Duration: time.Millisecond, Error: "connection refused"},
		storage.AttemptResult{Failed: true, LastError: "connection refused"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// client is a browser-like session: cookies, and the CSRF token of the last page.
type client struct {
	t    testing.TB
	e    *consoleEnv
	http *http.Client
	csrf string
	base string   // the server's URL
	hdr  []string // header name, value pairs sent with every request
}

func (e *consoleEnv) client(t testing.TB) *client {
	return e.clientAt(t, e.srv.URL)
}

// clientAt is a client of the server at base (the console behind some middleware),
// sending the header pairs hdr with every request.
func (e *consoleEnv) clientAt(t testing.TB, base string, hdr ...string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, e: e, base: base, hdr: hdr, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]*)"`)

// do sends a request and returns the status and body; same-origin headers as a browser.
func (c *client) do(method, path string, form url.Values, hdr ...string) (int, string, http.Header) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", c.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	hdr = append(append([]string(nil), c.hdr...), hdr...)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindSubmatch(b); m != nil && string(m[1]) != "" {
		c.csrf = string(m[1])
	}
	return resp.StatusCode, string(b), resp.Header
}

func (c *client) get(path string) (int, string) {
	c.t.Helper()
	code, body, _ := c.do(http.MethodGet, path, nil)
	return code, body
}

// post sends a form with the session's CSRF token.
func (c *client) post(path string, form url.Values) (int, string, http.Header) {
	c.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", c.csrf)
	return c.do(http.MethodPost, path, form)
}

func (c *client) login(name string) *client {
	c.t.Helper()
	code, _, h := c.do(http.MethodPost, "/login", url.Values{"username": {name}, "password": {consolePassword}})
	if code != http.StatusSeeOther || h.Get("Location") != "/" {
		c.t.Fatalf("login %s: %d %s", name, code, h.Get("Location"))
	}
	if code, _ := c.get("/"); code != http.StatusOK {
		c.t.Fatalf("dashboard after login: %d", code)
	}
	return c
}

func (e *consoleEnv) as(t testing.TB, role string) *client { return e.client(t).login(role) }

// apiStatus is the status of a JSON API request with the bearer token tok.
func (e *consoleEnv) apiStatus(t testing.TB, tok string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/keys", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// page gets path and parses the answer.
func (c *client) page(path string) (int, nodes) {
	c.t.Helper()
	code, body := c.get(path)
	return code, parsePage(c.t, body)
}

func TestConsole_SignIn(t *testing.T) {
	e := newConsoleEnv(t)
	t.Run("RootRedirectsToLogin", func(t *testing.T) {
		c := e.client(t)
		code, _, h := c.do(http.MethodGet, "/", nil)
		if code != http.StatusSeeOther || h.Get("Location") != "/login" {
			t.Fatalf("GET / = %d %q, want 303 /login", code, h.Get("Location"))
		}
		code, _, h = c.do(http.MethodGet, "/events?booking=BK-1", nil)
		if code != http.StatusSeeOther || h.Get("Location") != "/login?next=%2Fevents%3Fbooking%3DBK-1" {
			t.Fatalf("GET /events = %d %q", code, h.Get("Location"))
		}
		code, p := c.page("/login")
		if code != 200 || p.named("username").len() != 1 || p.named("password").len() != 1 {
			t.Fatalf("login form: %d", code)
		}
	})
	t.Run("CookieFlags", func(t *testing.T) {
		// cookies are the Set-Cookie lines of h by the cookie's name.
		cookies := func(h http.Header) map[string]string {
			out := map[string]string{}
			for _, ck := range h.Values("Set-Cookie") {
				name, _, _ := strings.Cut(ck, "=")
				out[name] = ck
			}
			return out
		}
		c := e.client(t)
		_, _, h := c.do(http.MethodPost, "/login", url.Values{"username": {"viewer"}, "password": {consolePassword}})
		for name, wants := range map[string][]string{
			"hookdedup_session": {"HttpOnly", "SameSite=Lax", "Max-Age="},
			// The device cookie goes to the sign-in form's target alone.
			"hookdedup_device": {"HttpOnly", "SameSite=Strict", "Max-Age=7776000", "Path=/login;"},
		} {
			ck := cookies(h)[name]
			for _, want := range wants {
				if !strings.Contains(ck, want) {
					t.Errorf("cookie %s %q lacks %s", name, ck, want)
				}
			}
			if strings.Contains(ck, "Secure") {
				t.Errorf("cookie %q is Secure over plain HTTP", ck)
			}
		}
		// Secure follows the scheme a trusted proxy reports, and only a trusted one.
		login := url.Values{"username": {"viewer"}, "password": {consolePassword}}
		_, _, h = e.clientAt(t, e.behind(t, "127.0.0.1/32")).do(http.MethodPost, "/login", login, "X-Forwarded-Proto", "https")
		for _, name := range []string{"__Host-hookdedup_session", "__Secure-hookdedup_device"} {
			if ck := cookies(h)[name]; !strings.Contains(ck, "Secure") {
				t.Errorf("cookie %s under TLS at a trusted proxy is not Secure: %q", name, ck)
			}
		}
		_, _, h = e.clientAt(t, e.behind(t, "10.0.0.0/8")).do(http.MethodPost, "/login", login, "X-Forwarded-Proto", "https")
		for _, name := range []string{"hookdedup_session", "hookdedup_device"} {
			if ck := cookies(h)[name]; ck == "" || strings.Contains(ck, "Secure") {
				t.Errorf("an untrusted peer's X-Forwarded-Proto made the cookie %s %q", name, ck)
			}
		}
	})
	t.Run("WrongPassword", func(t *testing.T) {
		for _, name := range []string{"admin", "ghost"} {
			code, body, _ := e.client(t).do(http.MethodPost, "/login", url.Values{"username": {name}, "password": {"nope"}})
			if said := parsePage(t, body).testid("login-error").text(); code != http.StatusUnauthorized || said != "Wrong username or password." {
				t.Fatalf("wrong password for %s: %d %q", name, code, said)
			}
		}
	})
	t.Run("IdleAndAbsoluteTimeouts", func(t *testing.T) {
		c := e.as(t, "viewer")
		e.clock.Add(90 * time.Minute)
		if code, _ := c.get("/"); code != 200 {
			t.Fatalf("after 90 min: %d", code)
		}
		e.clock.Add(2*time.Hour + time.Minute)
		code, _, h := c.do(http.MethodGet, "/", nil)
		if code != http.StatusSeeOther || h.Get("Location") != "/login" {
			t.Fatalf("after 2 h idle: %d %q, want a redirect to /login", code, h.Get("Location"))
		}
		_, p := c.page("/login")
		p.testid("flash").shows("without activity")

		c = e.as(t, "viewer")
		for range 13 {
			e.clock.Add(time.Hour)
			c.get("/")
		}
		if code, _, _ := c.do(http.MethodGet, "/", nil); code != http.StatusSeeOther {
			t.Fatalf("after 13 h: %d, want the session ended", code)
		}
	})
	t.Run("Logout", func(t *testing.T) {
		c := e.as(t, "viewer")
		code, _, h := c.post("/logout", nil)
		if code != http.StatusSeeOther || !strings.Contains(h.Get("Set-Cookie"), "Max-Age=0") {
			t.Fatalf("logout: %d %q", code, h.Get("Set-Cookie"))
		}
		if code, _, _ := c.do(http.MethodGet, "/", nil); code != http.StatusSeeOther {
			t.Fatalf("after logout GET / = %d", code)
		}
	})
}

func TestConsole_Pages(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "admin")
	dupURL := fmt.Sprintf("/events/%d", e.dup.ID)
	// shows: for each data-testid ("" for the whole page), the texts it shows.
	for _, tc := range []struct {
		path  string
		shows map[string][]string
		check func(t *testing.T, p nodes)
	}{
		{"/", map[string][]string{"card-money": {"190.00"}, "card-stuck": {"Stuck keys"}, "source-stats": {"ota", "pms"}, "chart": nil},
			func(t *testing.T, p nodes) {
				charts := p.testid("chart")
				if len(charts.attrs("role")) != charts.len() || charts.tag("title").len() == 0 || len(charts.tag("title").attrs("id")) == 0 {
					t.Error("a chart is not an image with a title")
				}
			}},
		{"/?range=24h", map[string][]string{"chart": nil}, nil},
		{"/?range=30d", map[string][]string{"chart": nil}, nil},
		{"/events", map[string][]string{"events": {"BK-42"}}, func(t *testing.T, p nodes) {
			if p.testid("events").class("badge-mismatch").len() == 0 || p.testid("events").class("badge-rejected").len() == 0 {
				t.Error("no mismatch or rejected badge")
			}
		}},
		{"/events?booking=BK-42&outcome=duplicate", map[string][]string{"events": {"190.00"}}, func(t *testing.T, p nodes) {
			if links := p.testid("event-link").attrs("href"); !slices.Equal(links, []string{dupURL}) {
				t.Errorf("listed %v, want the duplicate %s", links, dupURL)
			}
		}},
		{"/events?mismatch=1&source=ota", map[string][]string{"events": {"BK-42"}}, nil},
		{"/events?status=nothing-like-this", map[string][]string{"empty": {"No delivery matches this filter"}}, nil},
		{dupURL, map[string][]string{"key-fields": {"/booking_id", `"BK-42"`}, "derivation": nil, "canonical": nil,
			"key-deliveries": nil, "headers": {"Webhook-Signature"}, "body": nil, "diff": nil},
			func(t *testing.T, p nodes) {
				diff := p.testid("diff")
				if !strings.Contains(diff.class("diff-line", "del").text(), "180.00") || !strings.Contains(diff.class("diff-line", "add").text(), "190.00") {
					t.Errorf("the diff does not take 180.00 out and put 190.00 in: %q", diff.text())
				}
			}},
		{fmt.Sprintf("/events/%d", e.rejected.ID), map[string][]string{"reject-reason": {"signature: no match"}, "": {"No body kept"}}, nil},
		{"/keys", map[string][]string{"keys": {"pms", "failed", "stuck", "connection refused"}, "bulk-release": nil}, nil},
		{"/keys?state=processed", map[string][]string{"keys": {"derived:9f2c"}}, nil},
		{"/keys?state=all", map[string][]string{"keys": {"derived:9f2c", "=cmd|evil"}}, nil},
		{"/lab", map[string][]string{"lab-form": nil}, nil},
		{"/audit", map[string][]string{"audit": {"add user", "admin as admin"}}, nil},
		{"/users", map[string][]string{"users": {"operator", "viewer"}}, nil},
		{"/sources", map[string][]string{"source": {"ota", "pms", "from environment variable PMS_TOKEN", "not covered", "signed timestamp"},
			"secret": {"whsec_••••"}}, nil},
	} {
		t.Run(tc.path, func(t *testing.T) {
			code, p := c.page(tc.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s = %d", tc.path, code)
			}
			for id, texts := range tc.shows {
				if id == "" {
					p.shows(texts...)
					continue
				}
				p.has(id)
				p.testid(id).shows(texts...)
			}
			if tc.check != nil {
				tc.check(t, p)
			}
		})
	}
	t.Run("Lab", func(t *testing.T) {
		c.get("/lab")
		code, body, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {`{"booking_id":"BK-1"}`}})
		if code != 200 {
			t.Fatalf("POST /lab = %d", code)
		}
		result := parsePage(t, body).testid("lab-result")
		result.shows("derived:abc")
		result.testid("lab-claim").shows("would be accepted")
	})
	t.Run("NotFound", func(t *testing.T) {
		for _, p := range []string{"/events/999999", "/events/x", "/nothing-here"} {
			if code, _ := c.get(p); code != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", p, code)
			}
		}
	})
	t.Run("Static", func(t *testing.T) {
		_, p := c.page("/")
		css := p.find(func(x *html.Node) bool {
			return x.Data == "link" && slices.Contains(x.Attr, html.Attribute{Key: "rel", Val: "stylesheet"})
		}).attrs("href")
		if len(css) != 1 || !regexp.MustCompile(`^/static/style\.css\?v=[0-9a-f]+$`).MatchString(css[0]) {
			t.Fatalf("stylesheet links %q", css)
		}
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+css[0], nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
			t.Fatalf("stylesheet: %d %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
	})
}

// bulkKeys stores n processed keys of source, newer than everything before them.
func bulkKeys(t *testing.T, db *sqlite.DB, source string, n int) {
	t.Helper()
	err := storagetest.BulkLoad(context.Background(), db, storagetest.Fill{Source: source, Keys: n,
		ClaimedAt: db.Now(), TTL: 24 * time.Hour, Headers: "{}",
		Key:  func(i int) string { return fmt.Sprintf("bulk-%06d", i) },
		Body: func(int) []byte { return []byte("{}") }}, nil)
	if err != nil {
		t.Fatal(err)
	}
}

// TestConsole_KeysScanWindow: the keys of a source with one key below many of another
// are searched a bounded stretch at a time, the page says so, and its link goes on.
func TestConsole_KeysScanWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("stores many claims")
	}
	e := newConsoleEnv(t)
	bulkKeys(t, e.db, "ota", storage.ScanWindow+10)
	c := e.as(t, "viewer")
	code, p := c.page("/keys?state=all&source=pms")
	if code != http.StatusOK {
		t.Fatalf("GET /keys = %d", code)
	}
	p.shows("No match among the most recent keys searched", "Search older keys")
	if strings.Contains(p.text(), "cmd|evil") {
		t.Fatal("the first page shows the old key: it searched more than its window")
	}
	next := p.testid("next").attrs("href")
	if len(next) != 1 || !strings.HasPrefix(next[0], "/keys?") || !strings.Contains(next[0], "before=") {
		t.Fatalf("links to search older keys: %q", next)
	}
	code, p = c.page(next[0])
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d", next[0], code)
	}
	p.testid("keys").shows("=cmd|evil")
	if strings.Contains(p.text(), "Search older keys") || p.testid("next").len() > 0 {
		t.Error("the last page links to another")
	}
	// Without a filter the page is a straight walk: full, with an ordinary next page.
	_, p = c.page("/keys?state=all")
	p.testid("keys").shows("bulk-")
	p.has("next")
	if strings.Contains(p.text(), "bounded stretch") {
		t.Error("an unfiltered page says it was cut short")
	}
}

// TestConsole_ManyDeliveriesOfAKey: a key with more deliveries than a page lists shows
// the first ones (and the delivery asked for), says so, links to all of them, and still
// compares with a delivery past the listed ones.
func TestConsole_ManyDeliveriesOfAKey(t *testing.T) {
	e := newConsoleEnv(t)
	var ds []*storage.Delivery
	for i := range web.KeyDeliveriesShown + 5 {
		d := &storage.Delivery{Source: "ota", Key: "evt_storm", KeyMethod: "event_id", PayloadHash: fmt.Sprint("h", i%2),
			ContentType: "application/json", Body: fmt.Appendf(nil, `{"n":%d}`, i%2)}
		if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	c := e.as(t, "viewer")
	last := ds[len(ds)-1]
	code, p := c.page(fmt.Sprintf("/events/%d", last.ID))
	if code != http.StatusOK {
		t.Fatalf("GET /events/%d = %d", last.ID, code)
	}
	more := p.testid("more-deliveries")
	more.shows("the first 100 are listed")
	if !slices.Contains(more.hrefs(), "/events?key=evt_storm&source=ota") {
		t.Errorf("no link to all deliveries of the key: %q", more.hrefs())
	}
	p.has("compare")
	table := p.testid("key-deliveries")
	table.shows("this one")
	if n := table.tag("tbody").tag("tr").len(); n != web.KeyDeliveriesShown+1 {
		t.Errorf("%d deliveries listed, want the first %d and this one", n, web.KeyDeliveriesShown)
	}
	if slices.Contains(table.hrefs(), fmt.Sprintf("/events/%d", ds[len(ds)-2].ID)) {
		t.Error("a delivery past the first ones, other than this one, is listed")
	}
	// Compare with one that is not listed: it is found all the same.
	with := ds[len(ds)-2]
	_, p = c.page(fmt.Sprintf("/events/%d?with=%d", last.ID, with.ID))
	if !slices.Contains(p.testid("compare").hrefs(), fmt.Sprintf("/events/%d", with.ID)) {
		t.Errorf("the comparison is not with %d: %q", with.ID, p.testid("compare").hrefs())
	}
	// A key with few deliveries says nothing of the kind.
	if _, p = c.page(fmt.Sprintf("/events/%d", e.dup.ID)); p.testid("more-deliveries").len() > 0 {
		t.Error("a key with two deliveries says it has more")
	}
}

func TestConsole_CSV(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	code, body, h := c.do(http.MethodGet, "/events.csv?source=pms", nil)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") || !strings.Contains(h.Get("Content-Disposition"), "attachment") {
		t.Fatalf("csv: %d %v", code, h)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) != 2 || rows[0][0] != "id" {
		t.Fatalf("csv rows = %v, %v", rows, err)
	}
	// Spreadsheet formulas in payload fields stay text.
	if !strings.Contains(body, "'=HYPERLINK(1)") || !strings.Contains(body, "'=cmd|evil") {
		t.Errorf("formula cells not neutralised:\n%s", body)
	}
	_, body, _ = c.do(http.MethodGet, "/events.csv?booking=BK-42", nil)
	if rows, _ := csv.NewReader(strings.NewReader(body)).ReadAll(); len(rows) != 3 {
		t.Errorf("booking filter: %d rows, want header and 2", len(rows))
	}
}

// endlessExport is the console's store with a CSV export of the events that never ends
// by itself: its first rows are out, and the rest wait for its context. started is
// closed once the rows are out.
type endlessExport struct {
	web.Store
	started chan struct{}
}

func (s endlessExport) EachDelivery(ctx context.Context, f storage.DeliveryFilter, fn func(storage.Delivery) error) error {
	for i := range 600 { // past a stretch of 500: rows go out to the client
		if err := fn(storage.Delivery{ID: int64(i + 1), Source: "pms", Outcome: storage.Accepted}); err != nil {
			return err
		}
	}
	close(s.started)
	<-ctx.Done()
	return ctx.Err()
}

// TestConsole_CSVEndsWhenTheServerStops: a CSV export in progress lifts the server's
// write timeout for up to 30 minutes, so a stop that waits for requests in flight would
// wait for it. EndLongResponses, which serve calls as it begins to stop, ends it at once,
// and cuts it off: the download fails rather than end as if it were the whole export.
func TestConsole_CSVEndsWhenTheServerStops(t *testing.T) {
	started := make(chan struct{})
	e := newConsoleEnv(t, func(c *web.Config) { c.Store = endlessExport{Store: c.Store, started: started} })
	c := e.as(t, "viewer")
	type result struct {
		code int
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := c.http.Get(e.srv.URL + "/events.csv")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{code: resp.StatusCode, body: string(b), err: err}
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the export did not start")
	}
	e.server.EndLongResponses()
	select {
	case r := <-got:
		if r.err == nil {
			t.Errorf("the export ended as if whole (%d, %d bytes); want it cut off", r.code, len(r.body))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the export still runs 5 s after EndLongResponses")
	}
	// The rest of the console is not stopped: pages still answer.
	if code, _ := c.get("/events"); code != http.StatusOK {
		t.Errorf("/events after EndLongResponses: %d, want 200", code)
	}
}

// TestConsole_Roles checks what each role may do, on the server: viewers browse,
// operators also release and reprocess, admins also manage users and see sources.
func TestConsole_Roles(t *testing.T) {
	e := newConsoleEnv(t)
	browse := []string{"/", "/events", "/events.csv", fmt.Sprintf("/events/%d", e.dup.ID), "/keys", "/lab", "/audit"}
	admin := []string{"/users", "/sources"}
	for _, tc := range []struct {
		role                string
		release, adminPages bool
	}{
		{storage.RoleViewer, false, false},
		{storage.RoleOperator, true, false},
		{storage.RoleAdmin, true, true},
	} {
		t.Run(tc.role, func(t *testing.T) {
			c := e.as(t, tc.role)
			for _, p := range browse {
				if code, _ := c.get(p); code != 200 {
					t.Errorf("GET %s = %d, want 200", p, code)
				}
			}
			for _, p := range admin {
				code, _ := c.get(p)
				if want := map[bool]int{true: 200, false: 403}[tc.adminPages]; code != want {
					t.Errorf("GET %s = %d, want %d", p, code, want)
				}
			}
			if _, p := c.page("/"); slices.Contains(p.hrefs(), "/users") != tc.adminPages {
				t.Errorf("users link shown = %v", !tc.adminPages)
			}
			if _, p := c.page("/keys"); (p.testid("bulk-release").len() > 0) != tc.release {
				t.Errorf("release button shown = %v", !tc.release)
			}

			code, _, _ := c.post("/users", url.Values{"name": {"new-" + tc.role}, "role": {"admin"}, "password": {"a long enough password"}})
			if want := map[bool]int{true: 303, false: 403}[tc.adminPages]; code != want {
				t.Errorf("POST /users = %d, want %d", code, want)
			}
			code, _, _ = c.post("/sources/ota/reveal", nil)
			if want := map[bool]int{true: 200, false: 403}[tc.adminPages]; code != want {
				t.Errorf("POST reveal = %d, want %d", code, want)
			}
			code, _, _ = c.post("/keys/release", url.Values{"k": {"ota/derived:9f2c"}, "reason": {"test"}, "action": {"release"}})
			if want := map[bool]int{true: 303, false: 403}[tc.release]; code != want {
				t.Errorf("POST /keys/release = %d, want %d", code, want)
			}
		})
	}
	log, err := e.db.AuditLog(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	actors := map[string]bool{}
	for _, a := range log {
		actors[a.Actor] = true
	}
	if actors["viewer"] || !actors["operator"] || !actors["admin"] {
		t.Errorf("audit actors = %v", actors)
	}
}

func TestConsole_Release(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	c := e.as(t, "operator")
	c.get("/keys")
	t.Run("ReasonRequired", func(t *testing.T) {
		code, _, h := c.post("/keys/release", url.Values{"k": {"pms/" + e.failedKey}, "action": {"release"}, "return": {"/keys"}})
		if code != 303 || h.Get("Location") != "/keys" {
			t.Fatalf("release without reason: %d %q", code, h.Get("Location"))
		}
		_, p := c.page("/keys")
		p.testid("flash").shows("Give a reason")
		if cl, _ := e.db.Claim(ctx, "pms", e.failedKey); cl.State != storage.StateFailed {
			t.Fatalf("released without a reason: %s", cl.State)
		}
	})
	t.Run("Bulk", func(t *testing.T) {
		code, _, h := c.post("/keys/release", url.Values{"k": {"pms/" + e.failedKey, "ota/derived:9f2c", "ota/no-such-key"},
			"reason": {"downstream fixed"}, "action": {"reprocess"}, "return": {"https://evil.example/"}})
		if code != 303 || h.Get("Location") != "/keys" {
			t.Fatalf("bulk: %d %q (an outside return address must not be followed)", code, h.Get("Location"))
		}
		_, p := c.page("/keys")
		p.testid("flash").shows("Reprocessing 2 keys.", "1 no longer exist")
		if cl, _ := e.db.Claim(ctx, "pms", e.failedKey); cl.State != storage.StateProcessing {
			t.Fatalf("state after reprocess: %s", cl.State)
		}
		_, p = c.page("/audit")
		p.testid("audit").shows("reprocess", "downstream fixed", "operator")
	})
}

// TestConsole_CrossOrigin checks that a state-changing request from another site is
// refused, with or without a token, and that a same-site one without the token is too.
func TestConsole_CrossOrigin(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	c := e.as(t, "admin")
	c.get("/keys")
	form := url.Values{"k": {"pms/" + e.failedKey}, "reason": {"csrf"}, "action": {"release"}, "csrf": {c.csrf}}
	for _, hdr := range [][]string{
		{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://evil.example", "Sec-Fetch-Site", ""}, // a browser without Fetch metadata
		{"Sec-Fetch-Site", "cross-site"},
	} {
		code, _, _ := c.do(http.MethodPost, "/keys/release", form, hdr...)
		if code != http.StatusForbidden {
			t.Errorf("cross-origin POST with %v = %d, want 403", hdr, code)
		}
	}
	noToken := url.Values{"k": form["k"], "reason": form["reason"], "action": form["action"]}
	if code, _, _ := c.do(http.MethodPost, "/keys/release", noToken); code != http.StatusForbidden {
		t.Errorf("POST without the CSRF token = %d, want 403", code)
	}
	if code, _, _ := c.do(http.MethodPost, "/users", url.Values{"name": {"mallory"}, "role": {"admin"}, "password": {"a long enough password"}, "csrf": {"forged"}}); code != http.StatusForbidden {
		t.Errorf("POST with a forged token = %d, want 403", code)
	}
	if code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {"admin"}, "password": {consolePassword}},
		"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Errorf("cross-site sign-in = %d, want 403", code)
	}
	if cl, _ := e.db.Claim(ctx, "pms", e.failedKey); cl.State != storage.StateFailed {
		t.Fatalf("a refused request changed the key: %s", cl.State)
	}
	if _, err := e.db.UserByName(ctx, "mallory"); err == nil {
		t.Fatal("a refused request added a user")
	}
}

// TestConsole_PayloadEscaped checks that a payload's <script> is shown as text.
func TestConsole_PayloadEscaped(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	// A script element holding the payload's code would run; the payload is text.
	scripted := func(p nodes, code string) bool { return strings.Contains(p.tag("script").text(), code) }
	for _, path := range []string{fmt.Sprintf("/events/%d", e.dup.ID), fmt.Sprintf("/events/%d", e.first.ID)} {
		_, p := c.page(path)
		if scripted(p, "alert(") {
			t.Errorf("%s renders the payload's script as markup", path)
		}
		p.testid("body").shows("<script>alert('pwned')</script>")
	}
	c.get("/lab")
	payload := `{"x":"</textarea><script>alert(1)</script>"}`
	_, body, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {payload}})
	p := parsePage(t, body)
	if scripted(p, "alert(1)") {
		t.Error("the lab echoes the pasted payload as markup")
	}
	if got := p.testid("lab-payload").text(); got != payload {
		t.Errorf("the lab's payload field holds %q, want the payload as pasted", got)
	}
	_, _, h := c.do(http.MethodGet, "/", nil)
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("no script policy: %q", csp)
	}
}

// TestConsole_NoSecret checks that no page shows a secret, and that the admin-only
// reveal shows it in its own answer and writes the audit log.
func TestConsole_NoSecret(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "admin")
	for _, p := range []string{"/", "/events", fmt.Sprintf("/events/%d", e.dup.ID), "/events.csv", "/keys", "/keys?state=all",
		"/lab", "/audit", "/users", "/sources", "/login"} {
		if _, body := c.get(p); strings.Contains(body, consoleSecret) || strings.Contains(body, "THIS-SECRET") {
			t.Errorf("%s shows a secret", p)
		}
	}
	code, body, h := c.post("/sources/ota/reveal", nil)
	if revealed := parsePage(t, body).testid("revealed").text(); code != 200 || revealed != consoleSecret || !strings.Contains(h.Get("Cache-Control"), "no-store") {
		t.Fatalf("reveal: %d %q", code, revealed)
	}
	if code, _, _ := c.post("/sources/pms/reveal", nil); code != http.StatusBadRequest {
		t.Errorf("reveal of a configured secret = %d, want 400", code)
	}
	if _, body := c.get("/sources"); strings.Contains(body, consoleSecret) {
		t.Error("the revealed secret stays on the page")
	}
	_, p := c.page("/audit")
	p.testid("audit").shows("reveal secret")
}

func TestConsole_AddUser(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "admin")
	c.get("/users")
	refusal := func(body string) string {
		return parsePage(t, body).testid("add-user").withAttr("role", "alert").text()
	}
	code, body, _ := c.post("/users", url.Values{"name": {"ana"}, "role": {"operator"}, "password": {"short"}})
	if said := refusal(body); code != http.StatusUnprocessableEntity || said != "The password needs at least 12 characters." {
		t.Fatalf("short password: %d %q", code, said)
	}
	code, _, _ = c.post("/users", url.Values{"name": {"ana"}, "role": {"operator"}, "password": {"a long enough password"}})
	if code != http.StatusSeeOther {
		t.Fatalf("add user: %d", code)
	}
	_, p := c.page("/users")
	p.testid("flash").shows("Added ana as operator.")
	p.testid("users").withAttr("data-user", "ana").shows("ana", "operator")
	code, body, _ = c.post("/users", url.Values{"name": {"ana"}, "role": {"viewer"}, "password": {"a long enough password"}})
	if said := refusal(body); code != http.StatusUnprocessableEntity || said != `There is already a user called "ana".` {
		t.Fatalf("duplicate user: %d %q", code, said)
	}
	// Another letter case is the same name: the audit log and four-eyes approvals
	// could not tell the two apart.
	code, body, _ = c.post("/users", url.Values{"name": {"ANA"}, "role": {"viewer"}, "password": {"a long enough password"}})
	if said := refusal(body); code != http.StatusUnprocessableEntity ||
		said != `There is already a user called "ana": "ANA" differs from it only in letter case, and would be taken for them.` {
		t.Fatalf("user of another letter case: %d %q", code, said)
	}
	ana := e.client(t)
	if code, _, _ := ana.do(http.MethodPost, "/login", url.Values{"username": {"ana"}, "password": {"a long enough password"}}); code != http.StatusSeeOther {
		t.Fatalf("the new user cannot sign in: %d", code)
	}
}

// TestConsole_ManageUsers changes another user's role and password and removes them,
// and checks that each takes effect at once: on their open session and API token too.
func TestConsole_ManageUsers(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	admin := e.as(t, "admin")
	admin.get("/users")
	const anaPassword = "ana's first password"
	if code, _, _ := admin.post("/users", url.Values{"name": {"ana"}, "role": {"operator"}, "password": {anaPassword}}); code != http.StatusSeeOther {
		t.Fatalf("add ana: %d", code)
	}
	// The page offers no way to lock oneself out.
	_, p := admin.page("/users")
	yourRow, anasRow := p.withAttr("data-user", "admin"), p.withAttr("data-user", "ana")
	anasRow.testid("user-remove").shows("Remove ana")
	if !slices.Contains(yourRow.hrefs(), "/account") {
		t.Error("the admin's own row does not send them to their account page")
	}
	if yourRow.testid("user-remove").len()+yourRow.testid("user-role").len() > 0 || p.testid("user-role").len() != 3 {
		t.Errorf("the users page offers the admin to demote or remove themselves")
	}
	signIn := func(password string) (*client, int) {
		c := e.client(t)
		code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {"ana"}, "password": {password}})
		c.get("/keys")
		return c, code
	}
	ana, code := signIn(anaPassword)
	if code != http.StatusSeeOther {
		t.Fatalf("ana signs in: %d", code)
	}
	// The admin chose that password: she chooses her own before anything else.
	const anaOwn = "ana's own password"
	if code, _, h := ana.do(http.MethodGet, "/keys", nil); code != http.StatusSeeOther || h.Get("Location") != "/account/password?next=%2Fkeys" {
		t.Fatalf("ana's first page: %d %q, want the password page", code, h.Get("Location"))
	}
	ana.get("/account/password")
	if code, _, h := ana.post("/account/password", url.Values{"current": {anaPassword}, "password": {anaOwn}, "again": {anaOwn}, "next": {"/keys"}}); code != http.StatusSeeOther || h.Get("Location") != "/keys" {
		t.Fatalf("ana chooses her password: %d %q", code, h.Get("Location"))
	}
	tok, _, err := e.db.CreateToken(ctx, "ana", "scripts", "test")
	if err != nil {
		t.Fatal(err)
	}
	api := func() int { return e.apiStatus(t, tok) }
	release := url.Values{"k": {"ota/derived:9f2c"}, "reason": {"test"}, "action": {"release"}}
	changed := func(path string, form url.Values, flash string) {
		t.Helper()
		code, _, h := admin.post(path, form)
		if code != http.StatusSeeOther || h.Get("Location") != "/users" {
			t.Fatalf("POST %s: %d %q", path, code, h.Get("Location"))
		}
		_, p := admin.page("/users")
		p.testid("flash").shows(flash)
	}

	// Users other than admins may change no user.
	for _, path := range []string{"/users/role", "/users/password", "/users/remove"} {
		if code, _, _ := ana.post(path, url.Values{"name": {"admin"}, "role": {"viewer"}, "password": {"a long enough password"}}); code != http.StatusForbidden {
			t.Errorf("operator POST %s = %d, want 403", path, code)
		}
	}
	// Nor may an admin without the session's CSRF token.
	if code, _, _ := admin.do(http.MethodPost, "/users/remove", url.Values{"name": {"ana"}}); code != http.StatusForbidden {
		t.Errorf("remove without the CSRF token = %d, want 403", code)
	}

	// A new role ends her sessions; signed in again, she has the new role's rights.
	changed("/users/role", url.Values{"name": {"ana"}, "role": {"viewer"}}, "ana is now viewer. Their sessions have ended.")
	if code, _ := ana.get("/keys"); code != http.StatusSeeOther {
		t.Fatalf("ana's session after a new role: %d, want a redirect to sign in", code)
	}
	if ana, code = signIn(anaOwn); code != http.StatusSeeOther {
		t.Fatalf("ana signs in again: %d", code)
	}
	if code, _, _ := ana.post("/keys/release", release); code != http.StatusForbidden {
		t.Fatalf("release by a demoted user = %d, want 403", code)
	}
	if code, _ := ana.get("/keys"); code != http.StatusOK {
		t.Fatalf("a viewer browses: %d", code)
	}

	// A new password ends her sessions; the old password no longer signs in.
	changed("/users/password", url.Values{"name": {"ana"}, "password": {"short"}}, "at least 12 characters")
	changed("/users/password", url.Values{"name": {"ana"}, "password": {"ana's second password"}}, "New password set for ana")
	if code, _ := ana.get("/keys"); code != http.StatusSeeOther {
		t.Fatalf("ana's session after a new password: %d, want a redirect to sign in", code)
	}
	if _, code := signIn(anaOwn); code != http.StatusUnauthorized {
		t.Fatalf("the old password signs in: %d", code)
	}
	ana, code = signIn("ana's second password")
	if code != http.StatusSeeOther {
		t.Fatalf("the new password: %d", code)
	}
	if code, _, h := ana.do(http.MethodGet, "/keys", nil); code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/account/password") {
		t.Fatalf("after an admin set her password: %d %q, want the password page", code, h.Get("Location"))
	}

	// An admin can't lock themselves out, and their own new password keeps them in.
	changed("/users/role", url.Values{"name": {"admin"}, "role": {"viewer"}}, "You can't change your own role")
	changed("/users/remove", url.Values{"name": {"admin"}}, "You can't remove yourself")
	if u, _ := e.db.UserByName(ctx, "admin"); u.Role != storage.RoleAdmin {
		t.Fatalf("admin's role: %s", u.Role)
	}
	// Nor set their own password here, where the current one is not asked for.
	changed("/users/password", url.Values{"name": {"admin"}, "password": {"the admin's new password"}}, "on your account page")
	if u, _ := e.db.UserByName(ctx, "admin"); bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte("the admin's new password")) == nil {
		t.Fatal("an admin set their own password without giving the current one")
	}
	if code, _ := admin.get("/"); code != http.StatusOK {
		t.Fatalf("admin after the refusal: %d", code)
	}

	// Removed: her session, her token and her name's next owner's sessions.
	if code := api(); code != http.StatusOK {
		t.Fatalf("ana's token before removal: %d", code)
	}
	changed("/users/remove", url.Values{"name": {"ana"}}, "Removed ana")
	if code, _ := ana.get("/keys"); code != http.StatusSeeOther {
		t.Fatalf("a removed user's session: %d, want a redirect to sign in", code)
	}
	if code := api(); code != http.StatusUnauthorized {
		t.Fatalf("a removed user's token: %d, want 401", code)
	}
	changed("/users/remove", url.Values{"name": {"ana"}}, `There is no user called "ana" any more.`)
	if code, _, _ := admin.post("/users", url.Values{"name": {"ana"}, "role": {"admin"}, "password": {"ana's second password"}}); code != http.StatusSeeOther {
		t.Fatalf("add ana again: %d", code)
	}
	if code, _ := ana.get("/keys"); code != http.StatusSeeOther {
		t.Fatalf("the removed ana's session works for the new ana: %d", code)
	}

	log, err := e.db.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range log {
		actions = append(actions, a.Actor+": "+a.Action+" "+a.Reason)
	}
	for _, want := range []string{"admin: change role ana to viewer", "admin: set password ana",
		"admin: remove user ana"} {
		if !slices.ContainsFunc(actions, func(a string) bool { return strings.HasPrefix(a, want) }) {
			t.Errorf("no audit row %q in %q", want, actions)
		}
	}
}

// TestConsole_Account changes a viewer's own password: the current one is asked, a
// wrong one counts towards the sign-in throttle, and the change ends the user's other
// sessions but not the one that made it.
func TestConsole_Account(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	me, other := e.as(t, "viewer"), e.as(t, "viewer")
	code, p := me.page("/account")
	if code != http.StatusOK {
		t.Fatalf("GET /account: %d", code)
	}
	if name, action := p.testid("account-name").text(), p.testid("account-password").attrs("action"); name != "viewer" ||
		!slices.Equal(action, []string{"/account/password"}) {
		t.Fatalf("account page: name %q, password form to %q", name, action)
	}
	// change answers the status, and the refusal the form says, if any.
	change := func(current, password, again string) (int, string) {
		t.Helper()
		code, body, _ := me.post("/account/password", url.Values{"current": {current}, "password": {password}, "again": {again}})
		return code, parsePage(t, body).testid("account-password").withAttr("role", "alert").text()
	}
	const next = "the viewer's next password"
	for _, tc := range []struct{ current, password, again, why string }{
		{"not my password", next, next, "current password is not right"},
		{consolePassword, "short", "short", "at least 12 characters"},
		{consolePassword, next, next + "!", "two new passwords differ"},
	} {
		if code, said := change(tc.current, tc.password, tc.again); code != http.StatusUnprocessableEntity || !strings.Contains(said, tc.why) {
			t.Errorf("%q: %d %q, want 422 saying %q", tc.why, code, said, tc.why)
		}
	}
	if u, _ := e.db.UserByName(ctx, "viewer"); bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(consolePassword)) != nil {
		t.Fatal("a refused change changed the password")
	}
	if code, _ := change(consolePassword, next, next); code != http.StatusSeeOther {
		t.Fatalf("change: %d", code)
	}
	_, p = me.page("/account")
	p.testid("flash").shows("Your password is changed")
	if code, _ := other.get("/events"); code != http.StatusSeeOther {
		t.Fatalf("the user's other session after the change: %d, want a redirect to sign in", code)
	}
	if code, _, _ := e.client(t).do(http.MethodPost, "/login", url.Values{"username": {"viewer"}, "password": {next}}); code != http.StatusSeeOther {
		t.Fatalf("sign in with the new password: %d", code)
	}
	log, err := e.db.AuditLog(ctx, 0, 1)
	if err != nil || len(log) != 1 || log[0].Actor != "viewer" || log[0].Action != "set password" {
		t.Fatalf("audit: %+v %v", log, err)
	}

	// Wrong current passwords are throttled like sign-ins: a stolen session cannot
	// guess its way to the password.
	for range 5 {
		change("guess", next, next)
	}
	code, body, h := me.post("/account/password", url.Values{"current": {next}, "password": {"yet another password"}, "again": {"yet another password"}})
	if said := parsePage(t, body).testid("account-password").withAttr("role", "alert").text(); code != http.StatusTooManyRequests ||
		!strings.HasPrefix(said, "Too many wrong passwords") || h.Get("Retry-After") == "" {
		t.Fatalf("after 5 wrong passwords: %d, Retry-After %q", code, h.Get("Retry-After"))
	}
}

// TestConsole_AccountTokens makes and revokes an API token from the account page: the
// token is shown once, works on the API as its user, and can be revoked only by them.
func TestConsole_AccountTokens(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	op := e.as(t, "operator")
	op.get("/account")
	if code, body, _ := op.post("/account/tokens", url.Values{"name": {" "}}); code != http.StatusUnprocessableEntity {
		t.Fatalf("a token without a name: %d", code)
	} else {
		parsePage(t, body).testid("new-token-form").withAttr("role", "alert").shows("Say what the token is for")
	}
	code, body, h := op.post("/account/tokens", url.Values{"name": {"support scripts"}})
	tok := parsePage(t, body).testid("new-token").text()
	if code != http.StatusOK || !regexp.MustCompile(`^hdk_[A-Za-z0-9_-]+$`).MatchString(tok) {
		t.Fatalf("make a token: %d, token shown: %q", code, tok)
	}
	for _, c := range h.Values("Set-Cookie") {
		if strings.Contains(c, tok) {
			t.Fatal("the token went into a cookie")
		}
	}
	_, body = op.get("/account")
	if strings.Contains(body, tok) || !strings.Contains(parsePage(t, body).testid("token-row").text(), "support scripts") {
		t.Fatal("the account page shows the token again, or not its name")
	}
	api := func() int { return e.apiStatus(t, tok) }
	if code := api(); code != http.StatusOK {
		t.Fatalf("the new token on the API: %d", code)
	}
	tokens, err := e.db.Tokens(ctx, "operator")
	if err != nil || len(tokens) != 1 {
		t.Fatalf("operator's tokens: %v %v", tokens, err)
	}
	id := fmt.Sprint(tokens[0].ID)

	// Another user cannot revoke it, even knowing its id.
	viewer := e.as(t, "viewer")
	viewer.get("/account")
	if code, _, _ := viewer.post("/account/tokens/revoke", url.Values{"id": {id}}); code != http.StatusSeeOther {
		t.Fatalf("revoke by another user: %d", code)
	}
	_, p := viewer.page("/account")
	p.testid("flash").shows("You have no valid token with that id.")
	if code := api(); code != http.StatusOK {
		t.Fatalf("another user revoked the token: %d", code)
	}

	if code, _, _ := op.post("/account/tokens/revoke", url.Values{"id": {id}}); code != http.StatusSeeOther {
		t.Fatalf("revoke: %d", code)
	}
	_, p = op.page("/account")
	p.testid("flash").shows("Token revoked")
	p.testid("token-row").shows("support scripts", "revoked 20")
	if code := api(); code != http.StatusUnauthorized {
		t.Fatalf("the revoked token on the API: %d", code)
	}
	log, err := e.db.AuditLog(ctx, 0, 2)
	if err != nil || len(log) != 2 || log[0].Action != "revoke token" || log[1].Action != "create token" ||
		log[0].Actor != "operator" || log[1].Actor != "operator" {
		t.Fatalf("audit: %+v %v", log, err)
	}
}

// TestConsole_TokenNameCountsCharacters: a token's name is counted in characters, as the
// form's maxlength counts them: 40 accented letters or 24 Japanese characters (more than
// 64 bytes) make a token, 65 letters do not, and neither does a control character.
func TestConsole_TokenNameCountsCharacters(t *testing.T) {
	e := newConsoleEnv(t)
	v := e.as(t, storage.RoleViewer)
	v.get("/account")
	for _, name := range []string{strings.Repeat("é", 40), "予約システム連携スクリプト・本番環境用トークン一"} {
		code, body, _ := v.post("/account/tokens", url.Values{"name": {name}})
		if code != http.StatusOK || parsePage(t, body).testid("new-token").len() != 1 {
			t.Errorf("token named %q (%d characters, %d bytes): %d, no token made", name, utf8.RuneCountInString(name), len(name), code)
		}
	}
	for name, want := range map[string]string{
		strings.Repeat("é", 65): "Keep the name to 64 characters at most (it has 65).",
		"ci\x1b[2J":             "control character (U+001B)",
	} {
		code, body, _ := v.post("/account/tokens", url.Values{"name": {name}})
		if code != http.StatusUnprocessableEntity {
			t.Errorf("token named %q: %d, want 422", name, code)
			continue
		}
		parsePage(t, body).testid("new-token-form").withAttr("role", "alert").shows(want)
	}
}
