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
