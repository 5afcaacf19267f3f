package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
)

// behind serves the console behind web.TrustedProxies(cidrs), as serve mounts it, and
// returns its URL.
func (e *consoleEnv) behind(t testing.TB, cidrs ...string) string {
	t.Helper()
	var ps []netip.Prefix
	for _, c := range cidrs {
		ps = append(ps, netip.MustParsePrefix(c))
	}
	srv := httptest.NewServer(web.TrustedProxies(ps)(e.handler))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestConsole_NextIsLocal signs in with hostile return addresses: each lands on the
// dashboard, never off-site.
func TestConsole_NextIsLocal(t *testing.T) {
	e := newConsoleEnv(t)
	// The sign-in page carries only a local next into its form.
	_, body := e.client(t).get("/login?next=/%09/evil.example")
	if next := parsePage(t, body).named("next").attrs("value"); !slices.Equal(next, []string{"/"}) {
		t.Errorf("the sign-in form's next is %q, want /", next)
	}
	if strings.Contains(body, "evil.example") {
		t.Error("the sign-in form carries the hostile next")
	}
	signIn := func(next string) (int, string) {
		t.Helper()
		code, _, h := e.client(t).do(http.MethodPost, "/login",
			url.Values{"username": {"viewer"}, "password": {consolePassword}, "next": {next}})
		return code, h.Get("Location")
	}
	for _, next := range []string{"/\t/evil.example", "//evil.example", "/\\evil.example", "/\\/evil.example",
		"https://evil.example/", "/\n/evil.example", "evil.example"} {
		if code, loc := signIn(next); code != http.StatusSeeOther || loc != "/" {
			t.Errorf("sign in with next %q: %d Location %q, want 303 /", next, code, loc)
		}
	}
	if code, loc := signIn("/events?booking=BK-1"); code != http.StatusSeeOther || loc != "/events?booking=BK-1" {
		t.Errorf("a local next: %d Location %q", code, loc)
	}
}

// TestConsole_SignOutEndsSession checks that signing out ends the session on the
// server: a copy of the cookie taken before is refused after.
func TestConsole_SignOutEndsSession(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	stolen := e.client(t)
	u, _ := url.Parse(e.srv.URL)
	stolen.http.Jar.SetCookies(u, c.http.Jar.Cookies(u))
	if code, _ := stolen.get("/events"); code != http.StatusOK {
		t.Fatalf("the copied cookie before sign-out: %d", code)
	}
	// A sign-out without the session's CSRF token (a form on another site, sent by a
	// client that says nothing of its origin) is refused and the session goes on.
	if code, _, _ := c.do(http.MethodPost, "/logout", url.Values{}); code != http.StatusForbidden {
		t.Fatalf("sign out without the CSRF token: %d, want 403", code)
	}
	if code, _ := stolen.get("/events"); code != http.StatusOK {
		t.Fatalf("the session after a refused sign-out: %d", code)
	}
	if code, _, _ := c.post("/logout", nil); code != http.StatusSeeOther {
		t.Fatalf("sign out: %d", code)
	}
	if code, _ := stolen.get("/events"); code != http.StatusSeeOther {
		t.Fatalf("the copied cookie after sign-out: %d, want a redirect to sign in", code)
	}
	_, p := stolen.page("/login")
	p.testid("flash").shows("Your session has ended")
	// Signing in again starts a new session; the old one stays ended.
	c.login("viewer")
	if code, _ := stolen.get("/events"); code != http.StatusSeeOther {
		t.Fatalf("the copied cookie after a new sign-in: %d", code)
	}
}

// TestConsole_SignOutEverywhere ends all of one's sessions from the account page: every
// browser of that user is signed out, other users are not, and the audit log says so.
func TestConsole_SignOutEverywhere(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	me, other, bystander := e.as(t, "operator"), e.as(t, "operator"), e.as(t, "viewer")
	_, p := me.page("/account")
	end := p.testid("end-sessions")
	end.shows("Sign out everywhere")
	if !slices.Equal(end.attrs("action"), []string{"/account/sessions/end"}) {
		t.Errorf("the sign-out-everywhere form posts to %q", end.attrs("action"))
	}
	code, _, h := me.post("/account/sessions/end", nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/login?out=everywhere" || !strings.Contains(h.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("sign out everywhere: %d %q %q", code, h.Get("Location"), h.Get("Set-Cookie"))
	}
	_, p = me.page("/login?out=everywhere")
	p.testid("flash").shows("signed out everywhere")
	for name, c := range map[string]*client{"this": me, "another": other} {
		if code, _ := c.get("/"); code != http.StatusSeeOther {
			t.Errorf("%s session of the user: %d, want a redirect to sign in", name, code)
		}
	}
	if code, _ := bystander.get("/"); code != http.StatusOK {
		t.Errorf("another user's session: %d", code)
	}
	log, err := e.db.AuditLog(ctx, 0, 1)
	if err != nil || len(log) != 1 || log[0].Actor != "operator" || log[0].Action != "end sessions" || log[0].Reason != "operator: 2 sessions" {
		t.Fatalf("audit: %+v %v", log, err)
	}
	e.as(t, "operator") // and signs in again
}

// TestConsole_AdminEndsSessions ends another user's sessions from the users page.
func TestConsole_AdminEndsSessions(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	admin, op1, op2, viewer := e.as(t, "admin"), e.as(t, "operator"), e.as(t, "operator"), e.as(t, "viewer")
	_, p := admin.page("/users")
	end := p.withAttr("data-user", "operator").testid("user-end-sessions")
	end.shows("End operator's sessions")
	if !slices.Equal(end.attrs("action"), []string{"/users/sessions/end"}) {
		t.Errorf("the end-sessions form posts to %q", end.attrs("action"))
	}
	if code, _, _ := viewer.post("/users/sessions/end", url.Values{"name": {"operator"}}); code != http.StatusForbidden {
		t.Fatalf("a viewer ends sessions: %d, want 403", code)
	}
	code, _, h := admin.post("/users/sessions/end", url.Values{"name": {"operator"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/users" {
		t.Fatalf("end sessions: %d %q", code, h.Get("Location"))
	}
	_, p = admin.page("/users")
	p.testid("flash").shows("Ended 2 sessions of operator.")
	for _, c := range []*client{op1, op2} {
		if code, _ := c.get("/"); code != http.StatusSeeOther {
			t.Errorf("operator's session after an admin ended it: %d", code)
		}
	}
	for name, c := range map[string]*client{"admin": admin, "viewer": viewer} {
		if code, _ := c.get("/"); code != http.StatusOK {
			t.Errorf("%s's session: %d", name, code)
		}
	}
	admin.post("/users/sessions/end", url.Values{"name": {"ghost"}})
	_, p = admin.page("/users")
	p.testid("flash").shows(`There is no user called "ghost" any more.`)
	log, err := e.db.AuditLog(ctx, 0, 1)
	if err != nil || len(log) != 1 || log[0].Actor != "admin" || log[0].Action != "end sessions" || log[0].Reason != "operator: 2 sessions" {
		t.Fatalf("audit: %+v %v", log, err)
	}
}

// TestConsole_HostOnLoopback: a page that re-points its own name at 127.0.0.1 (DNS
// rebinding) sends its requests to a console on loopback as same-origin requests, with
// its name in Host: they are refused before anything reads them, a password included.
// The names a tunnel's user types (an address, localhost) are served, and so is any
// name through a trusted proxy.
func TestConsole_HostOnLoopback(t *testing.T) {
	e := newConsoleEnv(t)
	send := func(base, method, host, path string) (int, string) {
		t.Helper()
		form := url.Values{"username": {"admin"}, "password": {consolePassword}}
		req, _ := http.NewRequest(method, base+path, strings.NewReader(form.Encode()))
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{"attacker.example:8081", "attacker.example", "127.0.0.1.nip.io:8081", "LOCALHOST.example:1",
		"1.2.3.4.5", "0x7g.1", "127.0.0.1x", "_0x7f.1", "localhost.localdomain.example"} {
		code, body := send(e.srv.URL, http.MethodPost, host, "/login")
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "trusted_proxies") {
			t.Errorf("a sign-in sent as %s to the loopback console: %d, want 421 that says why", host, code)
		}
		if code, _ := send(e.srv.URL, http.MethodGet, host, "/login"); code != http.StatusMisdirectedRequest {
			t.Errorf("the sign-in page as %s: %d, want 421", host, code)
		}
	}
	for _, host := range []string{"127.0.0.1:9999", "localhost:9999", "LocalHost.", "app.localhost:8081", "[::1]:8081", "127.0.0.2",
		"127.1:8081", "2130706433:8081", "0x7f.1", "0177.0.0.1", "localhost.localdomain:8081"} {
		if code, body := send(e.srv.URL, http.MethodPost, host, "/login"); code != http.StatusSeeOther {
			t.Errorf("the right password sent as %s: %d, want 303\n%.300s", host, code, body)
		}
	}
	if code, _ := send(e.behind(t, "127.0.0.1/32"), http.MethodPost, "console.example.com", "/login"); code != http.StatusSeeOther {
		t.Errorf("the right password as console.example.com through a trusted proxy: %d, want 303", code)
	}
}

// TestConsole_ThrottleDevice: behind an SSH tunnel every user comes from one address,
// and a guesser failing 30 names there keeps the address waiting. A browser where a user
// signed in before carries a device cookie, and that user's sign-ins from it count apart:
// the right password goes through. A new browser still waits with the address, the
// cookie speaks for its own name only, one not signed by the console for nobody, and the
// device's own wrong passwords are slowed as a name's at an address are.
func TestConsole_ThrottleDevice(t *testing.T) {
	e := newConsoleEnv(t)
	signIn := func(c *client, name, password string) int {
		t.Helper()
		code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {name}, "password": {password}})
		return code
	}
	admins := e.as(t, "admin") // the admin's own browser, signed in before
	guesser := e.client(t)
	for i := range 30 {
		if code := signIn(guesser, fmt.Sprintf("nobody-%d", i), "guess"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i, code)
		}
	}
	if code := signIn(e.client(t), "admin", consolePassword); code != http.StatusTooManyRequests {
		t.Fatalf("admin from a new browser at the guessing address: %d, want 429", code)
	}
	if code := signIn(admins, "admin", consolePassword); code != http.StatusSeeOther {
		t.Fatalf("admin from the browser admin signed in with before, at the guessing address: %d, want 303", code)
	}
	if code := signIn(admins, "operator", consolePassword); code != http.StatusTooManyRequests {
		t.Fatalf("operator from admin's browser: %d, want 429: the cookie is admin's", code)
	}
	forged := e.client(t)
	u, _ := url.Parse(e.srv.URL + "/login")
	for _, c := range admins.http.Jar.Cookies(u) {
		if c.Name == "hookdedup_device" {
			forged.http.Jar.SetCookies(u, []*http.Cookie{{Name: c.Name, Value: c.Value[:len(c.Value)-2] + "AA", Path: "/login"}})
		}
	}
	if len(forged.http.Jar.Cookies(u)) == 0 {
		t.Fatal("admin's browser holds no device cookie")
	}
	if code := signIn(forged, "admin", consolePassword); code != http.StatusTooManyRequests {
		t.Fatalf("admin with a device cookie altered: %d, want 429", code)
	}
	for range 3 {
		if code := signIn(admins, "admin", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("a wrong password from admin's browser: %d, want 401", code)
		}
	}
	if code := signIn(admins, "admin", consolePassword); code != http.StatusTooManyRequests {
		t.Fatalf("admin's browser after 3 wrong passwords of its own: %d, want 429", code)
	}
}

// TestConsole_ThrottleDeviceShared: two users of one browser (a front desk's) both
// signed in there before; while a guesser keeps the address waiting, each still signs
// in from it, and changes a password once signed in: that check counts against the
// session, not the address.
func TestConsole_ThrottleDeviceShared(t *testing.T) {
	e := newConsoleEnv(t)
	desk := e.as(t, "admin")
	if code, _, _ := desk.post("/logout", nil); code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", code)
	}
	desk.login("operator")
	guesser := e.client(t)
	for i := range 30 {
		if code, _, _ := guesser.do(http.MethodPost, "/login", url.Values{"username": {fmt.Sprintf("nobody-%d", i)}, "password": {"guess"}}); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i, code)
		}
	}
	for _, name := range []string{"admin", "operator"} {
		if code, _, _ := desk.do(http.MethodPost, "/login", url.Values{"username": {name}, "password": {consolePassword}}); code != http.StatusSeeOther {
			t.Fatalf("%s from the shared browser at the guessing address: %d, want 303", name, code)
		}
	}
	if code, _ := desk.get("/account"); code != http.StatusOK {
		t.Fatalf("account page: %d", code)
	}
	const better = "a much better passphrase 42"
	if code, body, _ := desk.post("/account/password", url.Values{"current": {consolePassword}, "password": {better}, "again": {better}}); code == http.StatusTooManyRequests || code >= 400 {
		t.Fatalf("operator, signed in, changing the password with the right current one: %d\n%.300s", code, body)
	}
}

// stealSession copies the session cookie of from into to (a stolen cookie).
func stealSession(t *testing.T, e *consoleEnv, from, to *client) {
	t.Helper()
	for _, base := range []string{from.base, to.base} {
		u, _ := url.Parse(base + "/")
		for _, c := range from.http.Jar.Cookies(u) {
			if c.Name == "hookdedup_session" {
				tu, _ := url.Parse(to.base + "/")
				to.http.Jar.SetCookies(tu, []*http.Cookie{{Name: c.Name, Value: c.Value, Path: "/"}})
				return
			}
		}
	}
	t.Fatal("no session cookie to steal")
}

// TestConsole_StolenSessionCannotBlockPasswordChange: the thief (another address)
// guesses the current password on the stolen session; the victim, on the same session
// from their own address, still changes the password (the remedy that ends the other
// sessions) with the right current one: the check counts against the session at each
// address.
func TestConsole_StolenSessionCannotBlockPasswordChange(t *testing.T) {
	e := newConsoleEnv(t)
	proxied := e.behind(t, "127.0.0.1/32")
	victim := e.clientAt(t, proxied, "X-Forwarded-For", "198.51.100.7").login("operator")
	thief := e.clientAt(t, proxied, "X-Forwarded-For", "203.0.113.66")
	stealSession(t, e, victim, thief)
	if code, _ := thief.get("/account"); code != http.StatusOK {
		t.Fatalf("account page with the stolen cookie: %d", code)
	}
	for i := 0; i < 4; i++ {
		thief.post("/account/password", url.Values{"current": {"guess"}, "password": {"a much better passphrase 42"}, "again": {"a much better passphrase 42"}})
	}
	if code, _ := victim.get("/account"); code != http.StatusOK {
		t.Fatalf("victim's account page: %d", code)
	}
	const better = "a much better passphrase 42"
	code, body, _ := victim.post("/account/password", url.Values{"current": {consolePassword}, "password": {better}, "again": {better}})
	if code == http.StatusTooManyRequests {
		t.Errorf("victim, from their own address, changing the password with the right current one after a thief's 4 guesses on the stolen session: %d, want it to go through\n%.200s", code, body)
	}
}

// TestConsole_StolenSessionIPv6: a thief of a session cookie holding an IPv6 /64 steps
// to a fresh address for each guess of the current password: the /64 is one address to
// the throttle, as at sign-in.
func TestConsole_StolenSessionIPv6(t *testing.T) {
	e := newConsoleEnv(t)
	proxied := e.behind(t, "127.0.0.1/32")
	victim := e.clientAt(t, proxied, "X-Forwarded-For", "198.51.100.7").login("operator")
	throttled := false
	for i := range 6 {
		thief := e.clientAt(t, proxied, "X-Forwarded-For", fmt.Sprintf("2001:db8:0:1::%x", i+1))
		stealSession(t, e, victim, thief)
		if code, _ := thief.get("/account"); code != http.StatusOK {
			t.Fatalf("account page with the stolen cookie: %d", code)
		}
		code, _, _ := thief.post("/account/password", url.Values{"current": {"guess"}, "password": {"a much better passphrase 42"},
			"again": {"a much better passphrase 42"}})
		if throttled = code == http.StatusTooManyRequests; throttled {
			break
		}
	}
	if !throttled {
		t.Error("6 wrong current passwords on a stolen session, each from another address of one /64: never 429")
	}
}

// TestConsole_DeviceCookieLongNames: names longer than user add's 64 characters (an
// older version took any; sign-in takes 128): eight of them pass what a cookie holds,
// and the device cookie drops its oldest names to keep the newest, so the last user
// to sign in at the desk is not left waiting with the address.
func TestConsole_DeviceCookieLongNames(t *testing.T) {
	e := newConsoleEnv(t)
	var names []string
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("u%d", i) + strings.Repeat("x", 126)
		storagetest.CreateUser(t, e.db, name, storage.RoleViewer, consolePassword) // as an older user add could
		names = append(names, name)
	}
	desk := e.client(t)
	for _, name := range names {
		if code, _, _ := desk.do(http.MethodPost, "/login", url.Values{"username": {name}, "password": {consolePassword}}); code != http.StatusSeeOther {
			t.Fatalf("sign-in %s: %d", name[:2], code)
		}
	}
	guesser := e.client(t)
	for i := range 30 {
		guesser.do(http.MethodPost, "/login", url.Values{"username": {fmt.Sprintf("nobody-%d", i)}, "password": {"guess"}})
	}
	if code, _, _ := desk.do(http.MethodPost, "/login", url.Values{"username": {names[7]}, "password": {consolePassword}}); code != http.StatusSeeOther {
		t.Errorf("the 8th user (128-char name), signed in from the desk before, at the guessing address: %d, want 303", code)
	}
}

// TestConsole_ThrottleIPv6Prefix: an IPv6 client holds a /64 (2^64 addresses), so the
// sign-in throttle counts its failures against the /64, as intake's bounds on
// rejections do: counted by the whole address, a guesser that changed address at each
// try would never be slowed, the name's three free tries given again at each one.
func TestConsole_ThrottleIPv6Prefix(t *testing.T) {
	e := newConsoleEnv(t)
	proxy := e.behind(t, "127.0.0.1/32")
	signIn := func(addr, name, password string) int {
		t.Helper()
		code, _, _ := e.clientAt(t, proxy, "X-Forwarded-For", addr).do(http.MethodPost, "/login",
			url.Values{"username": {name}, "password": {password}})
		return code
	}
	throttled := false
	for i := range 10 {
		if throttled = signIn(fmt.Sprintf("2001:db8:0:1::%x", i+1), "operator", "guess") == http.StatusTooManyRequests; throttled {
			break
		}
	}
	if !throttled {
		t.Fatal("10 wrong passwords for operator from 10 addresses of one /64, and none is slowed down")
	}
	// Another /64 is another client, the right password from it goes through.
	if code := signIn("2001:db8:0:2::1", "operator", consolePassword); code != http.StatusSeeOther {
		t.Fatalf("operator from another /64: %d, want 303", code)
	}
}

// TestConsole_Throttle checks that failed sign-ins slow the guesser down without
// locking the user out: the waits grow at the guessing address only, the right password
// from another address goes through meanwhile, and an address guessing many names is
// slowed down without touching other addresses. Addresses come from X-Forwarded-For,
// believed from the trusted proxy 127.0.0.1.
func TestConsole_Throttle(t *testing.T) {
	e := newConsoleEnv(t)
	proxy := e.behind(t, "127.0.0.1/32")
	signIn := func(addr, name, password string) (int, string, http.Header) {
		t.Helper()
		return e.clientAt(t, proxy, "X-Forwarded-For", addr).do(http.MethodPost, "/login",
			url.Values{"username": {name}, "password": {password}})
	}
	const a, b, c = "203.0.113.1", "198.51.100.2", "192.0.2.3"
	// refused is the wait a right password from addr is refused with, in seconds.
	refused := func(addr, name string) int {
		t.Helper()
		code, body, h := signIn(addr, name, consolePassword)
		if code != http.StatusTooManyRequests || !strings.HasPrefix(parsePage(t, body).testid("login-error").text(), "Too many failed sign-ins") {
			t.Fatalf("%s from %s: %d, want 429", name, addr, code)
		}
		n, err := strconv.Atoi(h.Get("Retry-After"))
		if err != nil {
			t.Fatalf("Retry-After %q", h.Get("Retry-After"))
		}
		return n
	}
	fail := func(addr, name string) {
		t.Helper()
		if code, _, _ := signIn(addr, name, "guess"); code != http.StatusUnauthorized {
			t.Fatalf("wrong password for %s from %s: %d, want 401", name, addr, code)
		}
	}

	// A guesses admin's password until A is refused; the right password from B still
	// goes through.
	throttled := false
	for range 10 {
		code, _, _ := signIn(a, "admin", "guess")
		if throttled = code == http.StatusTooManyRequests; throttled {
			break
		}
	}
	if !throttled {
		t.Fatal("10 wrong passwords from A, and A is not slowed down")
	}
	if code, _, _ := signIn(b, "admin", consolePassword); code != http.StatusSeeOther {
		t.Fatalf("admin from B while A is throttled: %d, want 303", code)
	}

	// Three tries at once; then waits of 1 s, 2 s, 4 s … from A.
	for range 3 {
		fail(a, "operator")
	}
	for _, want := range []int{1, 2, 4, 8} {
		if got := refused(a, "operator"); got != want {
			t.Fatalf("wait after a failure: %d s, want %d s", got, want)
		}
		e.clock.Add(time.Duration(want) * time.Second)
		fail(a, "operator")
	}
	// The right password from B goes through while A waits.
	if code, _, h := signIn(b, "operator", consolePassword); code != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("operator from B while A is throttled: %d, want 303", code)
	}
	if got := refused(a, "operator"); got != 16 {
		t.Fatalf("A's wait after B's sign-in: %d s, want 16 s", got)
	}
	// The waits stop growing at 15 minutes.
	for range 10 {
		wait := refused(a, "operator")
		if wait > 900 {
			t.Fatalf("wait %d s, over 15 minutes", wait)
		}
		e.clock.Add(time.Duration(wait) * time.Second)
		fail(a, "operator")
	}
	if got := refused(a, "operator"); got != 900 {
		t.Fatalf("wait after many failures: %d s, want 900", got)
	}

	// One address guessing many names: 30 tries, then it waits too; others do not.
	for i := range 30 {
		fail(c, fmt.Sprintf("nobody%d", i))
	}
	if got := refused(c, "viewer"); got != 1 {
		t.Fatalf("C's wait after 30 failures over many names: %d s, want 1 s", got)
	}
	if code, _, _ := signIn(b, "viewer", consolePassword); code != http.StatusSeeOther {
		t.Fatalf("viewer from B while C is throttled: %d, want 303", code)
	}

	// Behind a peer that is not trusted, a forged X-Forwarded-For changes nothing: every
	// try counts against the peer's own address.
	e.clock.Add(time.Hour)
	untrusted := e.behind(t, "10.0.0.0/8")
	for i := range 4 {
		code, _, _ := e.clientAt(t, untrusted, "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", 100+i)).do(http.MethodPost, "/login",
			url.Values{"username": {"admin"}, "password": {"guess"}})
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 3]; code != want {
			t.Fatalf("try %d with a forged address: %d, want %d", i+1, code, want)
		}
	}
}

// TestTrustedProxies checks which forwarded client address and scheme are believed: from
// a trusted peer the right-most address that is not a trusted proxy, from any other
// peer none at all.
func TestTrustedProxies(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.RemoteAddr, web.Scheme(r))
	})
	serve := func(cidr string) string {
		srv := httptest.NewServer(web.TrustedProxies([]netip.Prefix{netip.MustParsePrefix(cidr)})(echo))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	trusted, untrusted := serve("127.0.0.1/32"), serve("10.0.0.0/8")
	get := func(base string, hdr []string) (addr, scheme string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		addr, scheme, _ = strings.Cut(string(b), " ")
		return addr, scheme
	}
	const peer = "the peer"
	isPeer := func(addr string) bool { return strings.HasPrefix(addr, "127.0.0.1:") && !strings.HasSuffix(addr, ":0") }
	for _, tc := range []struct {
		name         string
		hdr          []string
		addr, scheme string
	}{
		{"NoHeaders", nil, peer, "http"},
		{"XFF", []string{"X-Forwarded-For", "203.0.113.7"}, "203.0.113.7:0", "http"},
		{"XFFRightMostUntrusted", []string{"X-Forwarded-For", "198.51.100.1, 203.0.113.7"}, "203.0.113.7:0", "http"},
		{"XFFPastTrustedProxies", []string{"X-Forwarded-For", "198.51.100.1,203.0.113.7, 127.0.0.1"}, "203.0.113.7:0", "http"},
		{"XFFAllTrusted", []string{"X-Forwarded-For", "127.0.0.1"}, "127.0.0.1:0", "http"},
		{"XFFSeveralHeaders", []string{"X-Forwarded-For", "198.51.100.1", "X-Forwarded-For", "203.0.113.7"}, "203.0.113.7:0", "http"},
		{"XFFPort", []string{"X-Forwarded-For", "203.0.113.7:4711"}, "203.0.113.7:4711", "http"},
		{"XFFIPv6", []string{"X-Forwarded-For", "2001:db8::7"}, "[2001:db8::7]:0", "http"},
		{"XFFMapped", []string{"X-Forwarded-For", "::ffff:203.0.113.7"}, "203.0.113.7:0", "http"},
		{"XFFGarbage", []string{"X-Forwarded-For", "not-an-address"}, peer, "http"},
		{"XFFGarbageLeftOfClient", []string{"X-Forwarded-For", "not-an-address, 203.0.113.7"}, "203.0.113.7:0", "http"},
		{"Forwarded", []string{"Forwarded", "for=192.0.2.60;proto=https;by=203.0.113.43"}, "192.0.2.60:0", "https"},
		{"ForwardedQuotedIPv6", []string{"Forwarded", `for="[2001:db8:cafe::17]:4711"`}, "[2001:db8:cafe::17]:4711", "http"},
		{"ForwardedSeveral", []string{"Forwarded", "for=198.51.100.1, For=192.0.2.60;proto=http"}, "192.0.2.60:0", "http"},
		{"ForwardedUnknown", []string{"Forwarded", "for=unknown"}, peer, "http"},
		{"ForwardedObfuscated", []string{"Forwarded", "for=_hidden, for=198.51.100.1"}, "198.51.100.1:0", "http"},
		{"XFFBeforeForwarded", []string{"Forwarded", "for=192.0.2.60", "X-Forwarded-For", "203.0.113.7"}, "203.0.113.7:0", "http"},
		{"Proto", []string{"X-Forwarded-Proto", "https"}, peer, "https"},
		{"ProtoOfNearestProxy", []string{"X-Forwarded-Proto", "https, http"}, peer, "http"},
		{"ProtoBeforeForwarded", []string{"X-Forwarded-Proto", "HTTPS", "Forwarded", "proto=http"}, peer, "https"},
		{"ProtoGarbage", []string{"X-Forwarded-Proto", "gopher"}, peer, "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, scheme := get(trusted, tc.hdr)
			if tc.addr == peer && !isPeer(addr) || tc.addr != peer && addr != tc.addr || scheme != tc.scheme {
				t.Errorf("from a trusted proxy: %s %s, want %s %s", addr, scheme, tc.addr, tc.scheme)
			}
			if addr, scheme := get(untrusted, tc.hdr); !isPeer(addr) || scheme != "http" {
				t.Errorf("from an untrusted peer: %s %s, want the peer over http", addr, scheme)
			}
		})
	}
}

// TestConsole_StrictTransport: a console reached over HTTPS, directly or through a
// trusted proxy that says so, tells the browser to keep to HTTPS for its host; one
// reached over plain HTTP says nothing, or a console served without TLS would lock
// its users out.
func TestConsole_StrictTransport(t *testing.T) {
	e := newConsoleEnv(t)
	tlsSrv := httptest.NewTLSServer(e.handler)
	t.Cleanup(tlsSrv.Close)
	get := func(c *http.Client, url string, hdr ...string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url+"/login", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Strict-Transport-Security")
	}
	if got := get(tlsSrv.Client(), tlsSrv.URL); got != "max-age=31536000" {
		t.Errorf("over HTTPS: Strict-Transport-Security %q, want max-age=31536000", got)
	}
	if got := get(http.DefaultClient, e.srv.URL); got != "" {
		t.Errorf("over plain HTTP: Strict-Transport-Security %q, want none", got)
	}
	proxied := e.behind(t, "127.0.0.1/32")
	if got := get(http.DefaultClient, proxied, "X-Forwarded-Proto", "https"); got != "max-age=31536000" {
		t.Errorf("through a trusted proxy saying https: Strict-Transport-Security %q, want max-age=31536000", got)
	}
	if got := get(http.DefaultClient, proxied); got != "" {
		t.Errorf("through a trusted proxy saying nothing: Strict-Transport-Security %q, want none", got)
	}
}

// TestConsole_FormBodyBounded: a console form's body is bounded, for the signed-in and
// the signed-out alike, and one past the bound is answered 413 naming the bound, whether
// it announced its length (refused before it is read) or not (chunked: read no further
// than the bound). Cut short, a form would read as one without its CSRF token, or, its
// token in a header, as one without its fields: neither is what went wrong, and neither
// may pass.
func TestConsole_FormBodyBounded(t *testing.T) {
	e := newConsoleEnv(t)
	big := strings.Repeat("x", 5<<20)
	op := e.as(t, "operator")
	hc := *op.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	post := func(path string, body io.Reader, hdr ...string) (*http.Request, int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", e.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return req, resp.StatusCode, string(b)
	}
	// unannounced hides a body's length from net/http, which then sends it chunked.
	unannounced := func(parts ...string) io.Reader {
		var rs []io.Reader
		for _, p := range parts {
			rs = append(rs, strings.NewReader(p))
		}
		return io.MultiReader(rs...)
	}
	release := "csrf=" + url.QueryEscape(op.csrf) + "&action=release&reason=r&k=pms%2F" + url.QueryEscape(e.failedKey) + "&pad="
	var multi strings.Builder
	mw := multipart.NewWriter(&multi)
	for _, f := range [][2]string{{"csrf", op.csrf}, {"action", "release"}, {"reason", "r"}, {"k", "pms/" + e.failedKey}, {"pad", big}} {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	mw.Close()
	for _, tc := range []struct {
		name, path string
		body       io.Reader
		hdr        []string
		want       int
		limit      string // named in the answer
	}{
		{"SignInAnnounced", "/login", strings.NewReader("username=admin&password=" + big), nil, http.StatusRequestEntityTooLarge, "4 MiB"},
		{"SignInChunked", "/login", unannounced("username=admin&password=", big), nil, http.StatusRequestEntityTooLarge, "16 KiB"},
		{"FormAnnounced", "/keys/release", strings.NewReader(release + big), nil, http.StatusRequestEntityTooLarge, "4 MiB"},
		{"FormChunked", "/keys/release", unannounced(release, big), nil, http.StatusRequestEntityTooLarge, "4 MiB"},
		{"FormChunkedTokenInHeader", "/keys/release", unannounced("action=release&reason=r&pad=", big),
			[]string{"X-CSRF-Token", op.csrf}, http.StatusRequestEntityTooLarge, "4 MiB"},
		{"FormChunkedWrongToken", "/keys/release", unannounced("csrf=wrong&action=release&reason=r&pad=", big), nil,
			http.StatusRequestEntityTooLarge, "4 MiB"},
		{"MultipartFormChunked", "/keys/release", unannounced(multi.String()), []string{"Content-Type", mw.FormDataContentType()},
			http.StatusRequestEntityTooLarge, "4 MiB"},
		{"FormChunkedUnderTheBound", "/keys/release", unannounced(release, "x"), nil, http.StatusSeeOther, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, code, body := post(tc.path, tc.body, tc.hdr...)
			if chunked := req.ContentLength == 0; chunked != strings.Contains(tc.name, "Chunked") {
				t.Fatalf("sent with Content-Length %d", req.ContentLength)
			}
			if code != tc.want || !strings.Contains(body, tc.limit) {
				t.Errorf("POST %s: %d %.300q; want %d naming %q", tc.path, code, body, tc.want, tc.limit)
			}
			cl, err := e.db.Claim(context.Background(), "pms", e.failedKey)
			if err != nil {
				t.Fatal(err)
			}
			if released := cl.State != storage.StateFailed; released != (tc.want == http.StatusSeeOther && tc.path == "/keys/release") {
				t.Errorf("after POST %s the key is %s", tc.path, cl.State)
			}
		})
	}
}

// TestConsole_AdminRevokesUsersTokens: a new password set by an admin ends a user's
// sessions but not their API tokens, and says so; the admin revokes the tokens on the
// Users page (admins only), and the API refuses them at once.
func TestConsole_AdminRevokesUsersTokens(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t)
	tok, _, err := e.db.CreateToken(ctx, "operator", "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	viewer, operator := e.as(t, "viewer"), e.as(t, "operator")
	admin := e.as(t, "admin")
	for _, c := range []*client{viewer, operator} {
		if code, _, _ := c.post("/users/tokens/revoke", url.Values{"name": {"operator"}}); code != http.StatusForbidden {
			t.Errorf("a non-admin revoking a user's tokens: %d, want 403", code)
		}
	}
	_, _, h := admin.post("/users/password", url.Values{"name": {"operator"}, "password": {"a-new-long-password-1"}})
	_, p := admin.page(h.Get("Location"))
	if !strings.Contains(p.text(), "Their API token still works") {
		t.Errorf("after a new password: the page says %q; want it to say the token still works", p.text())
	}
	if n := p.testid("user-revoke-tokens").len(); n != 1 {
		t.Fatalf("revoke-tokens forms: %d, want 1 (the operator's)", n)
	}
	if code := e.apiStatus(t, tok); code != http.StatusOK {
		t.Fatalf("the token before its revocation: %d", code)
	}
	if code := e.apiStatus(t, tok); code != http.StatusOK {
		t.Fatalf("the token after refused revocations: %d", code)
	}
	_, _, h = admin.post("/users/tokens/revoke", url.Values{"name": {"operator"}})
	_, p = admin.page(h.Get("Location"))
	if !strings.Contains(p.text(), "Revoked 1 API token of operator.") || p.testid("user-revoke-tokens").len() != 0 {
		t.Errorf("after the revocation: the page says %q", p.text())
	}
	if code := e.apiStatus(t, tok); code != http.StatusUnauthorized {
		t.Errorf("the revoked token: %d, want 401", code)
	}
}

// TestConsole_SignInLogNamesOnlyUsers: a failed or throttled sign-in under a name no
// user has is logged without that name, which is often a password typed into the
// wrong field; one under a user's name is logged with it, so that an operator sees
// which account is being guessed.
func TestConsole_SignInLogNamesOnlyUsers(t *testing.T) {
	var logs logBuffer
	e := newConsoleEnv(t, func(c *web.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	signIn := func(c *client, name, password string) int {
		t.Helper()
		code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {name}, "password": {password}})
		return code
	}
	const typedPassword = "Tr0ub4dor&3-typed-as-a-name"
	c := e.client(t)
	if code := signIn(c, "viewer", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("a wrong password: %d, want 401", code)
	}
	throttled := false
	for range 40 {
		code := signIn(c, typedPassword, "guess")
		if code == http.StatusTooManyRequests {
			throttled = true
			break
		}
		if code != http.StatusUnauthorized {
			t.Fatalf("an unknown name: %d, want 401 or 429", code)
		}
	}
	if !throttled {
		t.Fatal("40 failures under one name at one address were never throttled")
	}
	out := logs.String()
	if strings.Contains(out, typedPassword) {
		t.Errorf("the log holds the name no user has:\n%s", out)
	}
	for _, want := range [][2]string{{`msg="sign-in failed"`, `user=viewer `}, {`msg="sign-in failed"`, `user="(no such user)"`},
		{`msg="sign-in throttled"`, `user="(no such user)"`}} {
		found := false
		for _, l := range strings.Split(out, "\n") {
			found = found || strings.Contains(l, want[0]) && strings.Contains(l, want[1])
		}
		if !found {
			t.Errorf("the log lacks a line %s with %s:\n%s", want[0], want[1], out)
		}
	}
}

// TestConsole_PasswordFormBounded: the password form takes 16 KiB at most, as the
// sign-in form does, though a signed-in user's form is read before the handler runs
// (for its CSRF token): one over it is answered 413 naming the bound, and the database
// shows nothing done: no password changed, no failure counted.
func TestConsole_PasswordFormBounded(t *testing.T) {
	const next = "a much better passphrase 42"
	for _, tc := range []struct{ name, current string }{
		{"RightPassword", consolePassword},
		{"WrongPassword", "not my password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newConsoleEnv(t)
			op := e.as(t, "operator")
			if code, _ := op.get("/account"); code != http.StatusOK {
				t.Fatalf("GET /account: %d", code)
			}
			raw := rawFile(t, e)
			hash := func() string {
				t.Helper()
				var h string
				if err := raw.QueryRow(`SELECT password_hash FROM users WHERE name = 'operator'`).Scan(&h); err != nil {
					t.Fatal(err)
				}
				return h
			}
			counted := func() string {
				t.Helper()
				var n, sum int
				if err := raw.QueryRow(`SELECT count(*), coalesce(sum(failures), 0) FROM login_failures`).Scan(&n, &sum); err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("%d rows, %d failures", n, sum)
			}
			before, failures := hash(), counted()
			code, body, _ := op.post("/account/password", url.Values{"current": {tc.current}, "password": {next}, "again": {next},
				"pad": {strings.Repeat("x", 20<<10)}})
			if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "16 KiB") {
				t.Errorf("a 20 KiB password form: %d %.300q; want 413 naming 16 KiB", code, body)
			}
			if hash() != before {
				t.Error("the password changed")
			}
			if got := counted(); got != failures {
				t.Errorf("login_failures holds %s, want %s as before: nothing was checked", got, failures)
			}
			// Under the bound, the form does what it did.
			if code, _, _ := op.post("/account/password", url.Values{"current": {tc.current}, "password": {next}, "again": {next}}); code == http.StatusRequestEntityTooLarge {
				t.Errorf("a short password form: %d", code)
			}
		})
	}
}
