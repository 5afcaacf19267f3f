package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestPrintedOutput_FullDisk: sources and service print what an operator saves to a
// file (`hookdedup service > /etc/systemd/system/hookdedup.service`): on a full disk
// they fail, naming it, rather than exit 0 over a file cut short.
func TestPrintedOutput_FullDisk(t *testing.T) {
	full := devFull(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookdedup.toml")
	if err := os.WriteFile(cfg, []byte(sourcesTOML), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return map[string]string{"ADYEN_HMAC_KEY": adyenKey}[k] }
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"sources", "--config", cfg, "--database", filepath.Join(dir, "test.db")},
		getenv, strings.NewReader(""), full, &stderr)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("sources to a full disk: %v, want an error that says no space is left", err)
	}
	e := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: full, stderr: &stderr}
	err = serviceUnits([]string{"--backup-timer", "--database", filepath.Join(dir, "test.db")}, e, "/usr/local/bin/hookdedup", nil)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("service to a full disk: %v, want an error that says no space is left", err)
	}
}

// TestCommands_OutputToFullDisk: a command that did its work but could not say so (stdout
// on a full disk) exits with an error that says so, not 0: a backup written, a user added,
// a password set or a token revoked with nothing shown to the operator, and a list that
// came out empty, are each an error naming the command, and the change stays made.
func TestCommands_OutputToFullDisk(t *testing.T) {
	full := devFull(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "hookdedup.db")
	getenv := func(string) string { return "" }
	ctx := context.Background()
	ok := func(stdin string, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(ctx, append(args, "--database", db), getenv, strings.NewReader(stdin), &out, &errOut); err != nil {
			t.Fatalf("%v: %v (%s)", args, err, errOut.String())
		}
		return out.String()
	}
	ok("first-password-1234\n", "user", "add", "admin", "--role", "admin")
	ok("", "token", "add", "admin")
	backup := filepath.Join(dir, "copy.db")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"user add", "second-password-1234\n", []string{"user", "add", "bob"}},
		{"user role", "", []string{"user", "role", "bob", "operator"}},
		{"user password", "third-password-12345\n", []string{"user", "password", "bob"}},
		{"user list", "", []string{"user", "list"}},
		{"token revoke", "", []string{"token", "revoke", "1"}},
		{"token list", "", []string{"token", "list"}},
		{"keys", "", []string{"keys"}},
		{"backup", "", []string{"backup", backup}},
		{"version", "", []string{"version"}},
	} {
		var errOut bytes.Buffer
		err := run(ctx, append(tc.args, "--database", db), getenv, strings.NewReader(tc.stdin), full, &errOut)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s to a full disk: %v, want an error that says no space is left", tc.name, err)
		}
	}
	if users := ok("", "user", "list"); !strings.Contains(users, "bob") || !strings.Contains(users, "operator") {
		t.Errorf("user list after the changes whose output was lost:\n%s\nwant bob, an operator", users)
	}
	tokens := strings.Split(strings.TrimSpace(ok("", "token", "list")), "\n")
	if f := strings.Fields(tokens[len(tokens)-1]); len(tokens) != 2 || f[0] != "1" || f[len(f)-1] == "-" {
		t.Errorf("token list after a revoke whose output was lost:\n%s\nwant token 1 revoked", strings.Join(tokens, "\n"))
	}
	var errOut bytes.Buffer
	err := run(ctx, []string{"user", "password", "bob", "--database", db}, getenv, strings.NewReader("fourth-password-1234\n"), full, &errOut)
	if err == nil || !strings.Contains(err.Error(), "user password ran, but its output could not be written") {
		t.Errorf("user password to a full disk: %v, want it named, and that it ran", err)
	}
	if _, err := os.Stat(backup); err != nil {
		t.Errorf("backup whose output was lost: %v, want the copy written", err)
	}
	// A command that only reads changed nothing: it does not tell the operator to check
	// what it changed.
	err = run(ctx, []string{"keys", "--database", db}, getenv, strings.NewReader(""), full, &errOut)
	if err == nil || !strings.HasPrefix(err.Error(), "keys: its output could not be written") || strings.Contains(err.Error(), "changed") {
		t.Errorf("keys to a full disk: %v, want it named, and nothing said of changes", err)
	}
}

// TestCommands_ListsToFullDisk: a list that has rows to show, and fails to write them
// (stdout on a full disk), is named as an empty one is, "keys: its output could not be
// written to stdout (…)", not as a bare write error that names no command; a bulk
// release that released keys says that it ran.
func TestCommands_ListsToFullDisk(t *testing.T) {
	full := devFull(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"evt_a", "evt_b"} {
		if err := db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: key, KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	ctx := context.Background()
	getenv := func(string) string { return "" }
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"user", "add", "admin", "--role", "admin", "--database", path}, getenv,
		strings.NewReader("first-password-1234\n"), &out, &errOut); err != nil {
		t.Fatalf("user add: %v (%s)", err, errOut.String())
	}
	if err := run(ctx, []string{"token", "add", "admin", "--database", path}, getenv, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("token add: %v (%s)", err, errOut.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"keys"}, "keys: its output could not be written to stdout ("},
		{[]string{"user", "list"}, "user list: its output could not be written to stdout ("},
		{[]string{"token", "list"}, "token list: its output could not be written to stdout ("},
		{[]string{"release", "--source", "ota", "--state", "processed", "--reason", "full disk"},
			"release ran, but its output could not be written to stdout ("},
	} {
		err := run(ctx, append(tc.args, "--database", path), getenv, strings.NewReader(""), full, &errOut)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s to a full disk: %v, want an error that begins %q and says no space is left",
				strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
