package main

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestCLI_PasswordRule: the command line refuses a password by the console's rule, in
// its words, for a new user and a new password alike.
func TestCLI_PasswordRule(t *testing.T) {
	for _, pw := range []string{"short", strings.Repeat("x", 73)} {
		want := storage.CheckPassword(pw)
		if want == nil {
			t.Fatalf("%q: the rule accepts it", pw)
		}
		for _, args := range [][]string{{"user", "add", "ana", "--role", "viewer"}, {"user", "password", "ana"}} {
			_, _, err := runIn(t, "", nil, pw+"\n", args...)
			if err == nil || err.Error() != want.Error() {
				t.Errorf("%s with a %d-byte password: %v, want %q", strings.Join(args[:2], " "), len(pw), err, want)
			}
		}
	}
}

// TestCLI_UserNameRule: the command line refuses a user name by the console's rule (a
// bidi override, a line break, a leading dot or space, more than 64 bytes), saying
// which rule; a name the console takes, it takes too.
func TestCLI_UserNameRule(t *testing.T) {
	const pw = "correct horse battery staple\n"
	for _, name := range []string{"root\u202E", "ana\nbob", " ana", ".ana", "ana bob", strings.Repeat("a", 65)} {
		_, _, err := runIn(t, "", nil, pw, "user", "add", name, "--role", "viewer")
		if err == nil || !strings.Contains(err.Error(), storage.CheckUserName(name).Error()) {
			t.Errorf("user add %q: %v, want the name rule", name, err)
		}
	}
	for _, name := range []string{"ana", "ana.b@example.com", "ops_1-x"} {
		if err := storage.CheckUserName(name); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if _, _, err := runIn(t, "", nil, pw, "user", "add", name, "--role", "viewer"); err != nil {
			t.Errorf("user add %q: %v", name, err)
		}
	}
}
