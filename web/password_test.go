package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
)

// TestConsole_OneTimePassword: a user whose password someone else chose (serve's first
// admin) is sent to choose their own before anything else; once they have, the console
// works and the given password no longer signs in. The JSON API is not the console's
// sessions: a token goes on working throughout.
func TestConsole_OneTimePassword(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	const printed, own = "printed at first start", "the first admin's own password"
	hash, err := bcrypt.GenerateFromPassword([]byte(printed), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.CreateUser(ctx, storage.User{Name: "first", Role: storage.RoleAdmin, PasswordHash: string(hash), MustChangePassword: true}, "test"); err != nil {
		t.Fatal(err)
	}
	tok, _, err := e.db.CreateToken(ctx, "first", "scripts", "test")
	if err != nil {
		t.Fatal(err)
	}
	signIn := func(password string) (*client, int) {
		c := e.client(t)
		code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {"first"}, "password": {password}, "next": {"/events"}})
		return c, code
	}
	c, code := signIn(printed)
	if code != http.StatusSeeOther {
		t.Fatalf("sign in with the printed password: %d", code)
	}

	// Every page, whatever role it needs, sends them to the password page first, and
	// brings them back after; nothing else may be changed meanwhile.
	for path, next := range map[string]string{"/events": "?next=%2Fevents", "/": "", "/users": "?next=%2Fusers", "/account": "?next=%2Faccount"} {
		if code, _, h := c.do(http.MethodGet, path, nil); code != http.StatusSeeOther || h.Get("Location") != "/account/password"+next {
			t.Errorf("GET %s: %d %q, want a redirect to the password page", path, code, h.Get("Location"))
		}
	}
	code, p := c.page("/account/password?next=%2Fevents")
	if code != http.StatusOK {
		t.Fatalf("the password page: %d", code)
	}
	p.testid("password-required").shows("chosen by someone else")
	if p.tag("nav").withAttr("aria-label", "Console").len() != 0 {
		t.Error("the password page offers the console's menu")
	}
	if got := p.testid("account-password").named("next").attrs("value"); len(got) != 1 || got[0] != "/events" {
		t.Errorf("the form goes on to %q, want /events", got)
	}
	if code, _, _ := c.post("/users", url.Values{"name": {"mallory"}, "role": {"admin"}, "password": {"a long enough password"}}); code != http.StatusForbidden {
		t.Errorf("add a user before choosing a password: %d, want 403", code)
	}
	if _, err := e.db.UserByName(ctx, "mallory"); err == nil {
		t.Fatal("a user was added before the password was chosen")
	}
	if code := e.apiStatus(t, tok); code != http.StatusOK {
		t.Errorf("the API with a token of the user: %d, want 200", code)
	}

	// Keeping the given password is no change.
	code, body, _ := c.post("/account/password", url.Values{"current": {printed}, "password": {printed}, "again": {printed}, "next": {"/events"}})
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("the printed password as the new one: %d, want 422", code)
	}
	parsePage(t, body).testid("account-password").withAttr("role", "alert").shows("choose another")

	code, _, h := c.post("/account/password", url.Values{"current": {printed}, "password": {own}, "again": {own}, "next": {"/events"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/events" {
		t.Fatalf("choose a password: %d %q, want a redirect to /events", code, h.Get("Location"))
	}
	code, p = c.page("/events")
	if code != http.StatusOK {
		t.Fatalf("/events once the password is chosen: %d", code)
	}
	p.testid("flash").shows("no longer works")
	if code, _ := c.get("/users"); code != http.StatusOK {
		t.Fatalf("/users once the password is chosen: %d", code)
	}
	if _, code := signIn(printed); code != http.StatusUnauthorized {
		t.Fatalf("the printed password after the change: %d, want 401", code)
	}
	c, code = signIn(own)
	if code != http.StatusSeeOther {
		t.Fatalf("sign in with the chosen password: %d", code)
	}
	if code, _ := c.get("/events"); code != http.StatusOK {
		t.Fatalf("/events after signing in with the chosen password: %d", code)
	}
	if code := e.apiStatus(t, tok); code != http.StatusOK {
		t.Errorf("the API with a token of the user, after: %d, want 200", code)
	}
}

// TestConsole_PasswordPageNext: the password page sends the browser on only to a path
// of the console, whatever ?next= says.
func TestConsole_PasswordPageNext(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	_, p := c.page("/account/password?next=%2F%2Fevil.example%2F")
	if got := p.testid("account-password").named("next").attrs("value"); len(got) != 1 || got[0] != "/" {
		t.Fatalf("next on the form: %q, want /", got)
	}
	if p.testid("password-required").len() != 0 {
		t.Error("a user who chose their password is told someone else did")
	}
	const next = "the viewer's next password"
	code, _, h := c.post("/account/password", url.Values{"current": {consolePassword}, "password": {next}, "again": {next}, "next": {"//evil.example/"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("change with next=//evil.example/: %d %q, want a redirect to /", code, h.Get("Location"))
	}
}
