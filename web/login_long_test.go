package web_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsole_SignInTooLong: a username or password longer than any account's is
// refused saying which and how long one may be. "Enter your username and password"
// told someone who had entered both, a password manager's long one pasted, to do it
// again.
func TestConsole_SignInTooLong(t *testing.T) {
	e := newConsoleEnv(t)
	for _, tc := range []struct {
		name, username, password string
		want                     []string
	}{
		{"Username", strings.Repeat("u", 129), "secret", []string{"username", "64 characters at most"}},
		{"Password", "admin", strings.Repeat("p", 513), []string{"password", "longer than any", "72 bytes at most"}},
		{"Missing", "admin", "", []string{"Enter your username and password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := e.client(t).do(http.MethodPost, "/login", url.Values{"username": {tc.username}, "password": {tc.password}})
			body = html.UnescapeString(body)
			if code != http.StatusBadRequest {
				t.Errorf("%d, want 400", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("the answer does not say %q", w)
				}
			}
			if strings.Contains(body, tc.password) && tc.password != "" {
				t.Error("the answer shows the password")
			}
		})
	}
}
