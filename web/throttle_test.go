package web_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/securecookie"
	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
)

// throttleFile is what whoever holds the database file (a backup, a copy made by
// migrate) reads there of the sign-in throttle: the keys of login_failures, the
// digests of the live sessions' ids, and the cookie keys.
type throttleFile struct {
	keys       []string
	live       map[string]bool // sessions.id_hash
	cookieKeys []byte          // setting console.session_keys: hash key, then block key
}

// rawFile opens e's database file directly, as whoever holds the file would, until t
// ends.
func rawFile(t *testing.T, e *consoleEnv) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+e.db.Path()+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// readThrottleFile reads e's database file through a connection of its own.
func readThrottleFile(t *testing.T, e *consoleEnv) throttleFile {
	t.Helper()
	raw := rawFile(t, e)
	var err error
	column := func(q string) []string {
		t.Helper()
		rows, err := raw.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var vs []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return vs
	}
	f := throttleFile{keys: column(`SELECT scope FROM login_failures`), live: map[string]bool{}}
	for _, h := range column(`SELECT id_hash FROM sessions`) {
		f.live[h] = true
	}
	if len(f.keys) == 0 {
		t.Fatal("login_failures is empty: no failure was counted")
	}
	v := column(`SELECT value FROM settings WHERE name = 'console.session_keys'`)
	if len(v) != 1 {
		t.Fatalf("session keys: %q", v)
	}
	if f.cookieKeys, err = base64.StdEncoding.DecodeString(v[0]); err != nil || len(f.cookieKeys) != 96 {
		t.Fatalf("session keys: %v", err)
	}
	return f
}

// words are the parts of the throttle's keys that could be an id or a name.
func (f throttleFile) words() []string {
	var ws []string
	for _, k := range f.keys {
		ws = append(ws, strings.FieldsFunc(k, func(r rune) bool { return r == ' ' || r == ':' })...)
	}
	return ws
}

// cookie is a cookie named name holding values, made with the file's cookie keys, as
// whoever holds the file can make one.
func (f throttleFile) cookie(t *testing.T, name string, values map[any]any) string {
	t.Helper()
	v, err := securecookie.EncodeMulti(name, values, securecookie.New(f.cookieKeys[:64], f.cookieKeys[64:]))
	if err != nil {
		t.Fatal(err)
	}
	return name + "=" + v
}

// TestConsole_ThrottleKeepsNoSessionID: a wrong current password, on the account page
// or on the password page a user whose password someone else chose is sent to first,
// counts against the session; the database keeps that count under no id of a live
// session (the sessions table keeps only their digests), so that the file, which also
// holds the cookie keys, makes no session cookie that works.
func TestConsole_ThrottleKeepsNoSessionID(t *testing.T) {
	for _, tc := range []struct{ name, user, page string }{
		{"AccountPage", "operator", "/account"},
		{"PasswordPage", "first", "/account/password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newConsoleEnv(t)
			hash, err := bcrypt.GenerateFromPassword([]byte(consolePassword), bcrypt.MinCost)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.db.CreateUser(context.Background(), storage.User{Name: "first", Role: storage.RoleAdmin,
				PasswordHash: string(hash), MustChangePassword: true}, "test"); err != nil {
				t.Fatal(err)
			}
			c := e.client(t)
			if code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {tc.user}, "password": {consolePassword}}); code != http.StatusSeeOther {
				t.Fatalf("sign in as %s: %d", tc.user, code)
			}
			if code, _ := c.get(tc.page); code != http.StatusOK {
				t.Fatalf("GET %s: %d", tc.page, code)
			}
			const next = "a much better passphrase 42"
			code, _, _ := c.post("/account/password", url.Values{"current": {"not my password"}, "password": {next}, "again": {next}})
			if code != http.StatusUnprocessableEntity {
				t.Fatalf("wrong current password: %d, want 422", code)
			}
			f := readThrottleFile(t, e)
			for _, w := range f.words() {
				sum := sha256.Sum256([]byte(w))
				if !f.live[hex.EncodeToString(sum[:])] {
					continue
				}
				t.Errorf("login_failures holds %q, the id of a live session", w)
				cookie := f.cookie(t, "hookdedup_session", map[any]any{"sid": w, "csrf": "x"})
				if code, _, _ := e.client(t).do(http.MethodGet, tc.page, nil, "Cookie", cookie); code == http.StatusOK {
					t.Errorf("a session cookie made from it and the keys in the file opens %s's %s", tc.user, tc.page)
				}
			}
			// The session is live still: an id read from the file would be a credential.
			if code, _ := c.get(tc.page); code != http.StatusOK {
				t.Fatalf("GET %s after one wrong password: %d", tc.page, code)
			}
		})
	}
}

// TestConsole_ThrottleKeepsNoNameAsTyped: a sign-in under a name no user has, often a
// password typed into the wrong field, is throttled as any other, and the database keeps
// its count under no part of the name as typed (nor the address), as the sign-in log
// leaves the name out.
func TestConsole_ThrottleKeepsNoNameAsTyped(t *testing.T) {
	e := newConsoleEnv(t)
	const typed = "Tr0ub4dor&3-horse-staple" // a password, typed into the username field
	c := e.client(t)
	for i := range 3 {
		if code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {typed}, "password": {"viewer"}}); code != http.StatusUnauthorized {
			t.Fatalf("sign-in %d under a name no user has: %d, want 401", i+1, code)
		}
	}
	if code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {typed}, "password": {"viewer"}}); code != http.StatusTooManyRequests {
		t.Fatalf("sign-in 4 under a name no user has: %d, want 429", code)
	}
	for _, k := range readThrottleFile(t, e).keys {
		for _, clear := range []string{typed, "Tr0ub4dor", "127.0.0.1"} {
			if strings.Contains(k, clear) {
				t.Errorf("login_failures keeps %q in clear: %q", clear, k)
			}
		}
	}
}

// TestConsole_ThrottleKeepsNoDeviceID: failures from a browser with a user's device
// cookie count against that device alone, and the database keeps that count under no
// part of the device's id: whoever holds the file, with the cookie keys in it, makes no
// cookie of that device, and so cannot keep the user waiting on their own browser.
func TestConsole_ThrottleKeepsNoDeviceID(t *testing.T) {
	e := newConsoleEnv(t)
	signIn := func(c *client, password string, hdr ...string) int {
		t.Helper()
		code, _, _ := c.do(http.MethodPost, "/login", url.Values{"username": {"admin"}, "password": {password}}, hdr...)
		return code
	}
	admins := e.as(t, "admin") // the admin's own browser: it holds admin's device cookie
	if code := signIn(admins, "guess"); code != http.StatusUnauthorized {
		t.Fatalf("a wrong password from admin's browser: %d, want 401", code)
	}
	f := readThrottleFile(t, e)
	for _, w := range f.words() {
		// A device cookie for admin with each word read for its id: one that is the
		// device's own counts against it.
		cookie := f.cookie(t, "hookdedup_device", map[any]any{"devices": []string{w + " admin"}})
		forger := e.client(t)
		for range 3 {
			if code := signIn(forger, "guess", "Cookie", cookie); code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
				t.Fatalf("a wrong password with a device cookie made from the file: %d", code)
			}
		}
	}
	if code := signIn(admins, consolePassword); code != http.StatusSeeOther {
		t.Fatalf("admin from their own browser after cookies made from the file failed: %d, want 303", code)
	}
}
