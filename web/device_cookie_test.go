package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// TestConsole_DeviceCookieMadeFromTheFile: the cookie keys stand in the database's
// settings, and so in every backup and copy of it. A device cookie made with them for
// a user, under an id of one's own, is no browser the user signed in from: its
// sign-ins wait with the address's, as they would without a cookie, rather than each
// new id bringing tries of its own past the address's wait.
func TestConsole_DeviceCookieMadeFromTheFile(t *testing.T) {
	e := newConsoleEnv(t)
	signIn := func(c *client, password string, hdr ...string) int {
		t.Helper()
		code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {"admin"}, "password": {password}}, hdr...)
		return code
	}
	admins := e.as(t, "admin") // the admin's own browser: its device cookie is a real one
	guesser := e.client(t)
	for i := range 3 {
		if code := signIn(guesser, "guess"); code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i+1, code)
		}
	}
	if code := signIn(guesser, "guess"); code != http.StatusTooManyRequests {
		t.Fatalf("a fourth wrong password at once: %d, want 429", code)
	}
	f := readThrottleFile(t, e)
	for i := range 3 {
		cookie := f.cookie(t, "hookdedup_device", map[any]any{"devices": []string{fmt.Sprintf("made-from-the-file-%d admin", i)}})
		if code := signIn(e.client(t), "guess", "Cookie", cookie); code != http.StatusTooManyRequests {
			t.Errorf("a wrong password with device cookie %d made from the file's keys: %d, want 429 (the address waits)", i+1, code)
		}
	}
	if code := signIn(admins, consolePassword); code != http.StatusSeeOther {
		t.Fatalf("admin from their own browser: %d, want 303", code)
	}
}
