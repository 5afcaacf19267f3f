package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_TokenFlagsBeforeSubcommand: "token --database a.db list" is refused as a
// usage error naming the flag, as audit refuses it, instead of failing on (or opening
// and migrating) ./hookdedup.db, a database never asked for.
func TestCLI_TokenFlagsBeforeSubcommand(t *testing.T) {
	flagsBeforeSubcommand(t, "token")
}

// TestCLI_TokenUsageBeforeDatabase: a mistaken token command line is refused for what
// is wrong with it, before any database is looked for, let alone opened and migrated.
func TestCLI_TokenUsageBeforeDatabase(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "lis", "--database", none}, "usage: hookdedup token"},
		{[]string{"token", "add", "--database", none}, "usage: hookdedup token"},
		{[]string{"token", "revoke", "one", "--database", none}, `token revoke: "one" is not a token id`},
		{[]string{"token", "add", "admin", "--name", "ci\x1b[2J", "--database", none}, "token add --name: The name holds a control character (U+001B)"},
		{[]string{"token", "add", "admin", "--name", strings.Repeat("é", 65), "--database", none}, "token add --name: Keep the name to 64 characters at most (it has 65)"},
		// Only add names a token: revoke 3 --name ci revoked token 3 whatever it was for.
		{[]string{"token", "revoke", "3", "--name", "ci", "--database", none}, "flag provided but not defined: -name"},
		{[]string{"token", "list", "--name", "ci", "--database", none}, "flag provided but not defined: -name"},
	} {
		out, code := cli(t, dir, nil, "", c.args...)
		if code != 1 || !strings.Contains(out, c.want) || strings.Contains(out, "no database") {
			t.Errorf("%q: exit %d, want 1 saying %q\n%s", c.args, code, c.want, out)
		}
	}
}

// TestCLI_TokenAddUnprintedIsRevoked: a token that token add cannot print (stdout on a
// full disk) was shown to no one and never can be: it is revoked, and token add exits 1
// saying so, rather than exit 0 leaving a valid credential that nobody holds.
func TestCLI_TokenAddUnprintedIsRevoked(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "correct horse battery\n", "user", "add", "alice", "--role", "admin"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	cmd := exec.Command(hookdedupBinary(t), "token", "add", "alice", "--name", "ci")
	cmd.Dir = dir
	cmd.Stdout = devFull(t)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "it was revoked, run token add again") {
		t.Errorf("token add with stdout on a full disk: %v\n%s\nwant exit 1 saying that the token was revoked", err, stderr.String())
	}
	list, code := cli(t, dir, nil, "", "token", "list")
	if code != 0 {
		t.Fatalf("token list: %d\n%s", code, list)
	}
	listed := false
	for line := range strings.Lines(list) {
		if f := strings.Fields(line); len(f) == 6 && f[3] == "ci" {
			listed = true
			if f[5] == "-" {
				t.Errorf("the token no one was shown is still valid: %s", line)
			}
		}
	}
	if !listed {
		t.Errorf("token list shows no token ci:\n%s", list)
	}
}

// TestCLI_TokenListShowsHiddenCharacters: a token's name is an admin's free text, which
// may hold bidi controls (a control character is refused, a U+202E is not): token list
// shows them as the console does, so that a name cannot read as another on a terminal.
func TestCLI_TokenListShowsHiddenCharacters(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "correct horse battery\n", "user", "add", "alice", "--role", "admin"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "token", "add", "alice", "--name", "ci\u202egnp.exe"); code != 0 {
		t.Fatalf("token add: %d\n%s", code, out)
	}
	list, code := cli(t, dir, nil, "", "token", "list")
	if code != 0 {
		t.Fatalf("token list: %d\n%s", code, list)
	}
	if strings.ContainsRune(list, '\u202e') || !strings.Contains(list, `ci\u202egnp.exe`) {
		t.Errorf("token list:\n%s\nwant the name shown as ci\\u202egnp.exe, without the raw U+202E", list)
	}
}
