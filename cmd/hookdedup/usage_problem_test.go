package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_UsageNamesWhatIsWrong: key, user and token refuse a command line with a
// missing flag, a missing argument or one too many by naming it, then give the usage,
// as audit does: the usage alone leaves the operator to compare it with what they typed.
func TestCLI_UsageNamesWhatIsWrong(t *testing.T) {
	cli := cliOn(filepath.Join(t.TempDir(), "t.db"))
	for _, tc := range []struct {
		args        []string
		want, usage string
	}{
		{[]string{"key", "payload.json"}, "--source is required", "usage: hookdedup key"},
		{[]string{"key", "--source", "ota", "a.json", "b.json"}, `key takes one FILE at most; "b.json" is one too many`, "usage: hookdedup key"},
		{[]string{"user", "add", "--role", "admin"}, "user add: NAME is missing", "usage: hookdedup user add"},
		{[]string{"user", "add", "rita", "hunter2"}, "user add takes NAME only; 1 more argument(s) given, not shown", "usage: hookdedup user add"},
		{[]string{"user", "role", "rita"}, "user role: ROLE is missing", "usage: hookdedup user add"},
		{[]string{"user", "role"}, "user role: NAME and ROLE are missing", "usage: hookdedup user add"},
		{[]string{"user", "remove"}, "user remove: NAME is missing", "usage: hookdedup user add"},
		{[]string{"user", "list", "rita"}, `user list takes no argument; "rita" is one`, "usage: hookdedup user add"},
		{[]string{"user", "password", "rita", "hunter2"}, "user password takes NAME only; 1 more argument(s) given, not shown", "usage: hookdedup user add"},
		{[]string{"token", "add"}, "token add: USER is missing", "usage: hookdedup token add"},
		{[]string{"token", "revoke"}, "token revoke: ID is missing", "usage: hookdedup token add"},
		{[]string{"token", "list", "3"}, `token list takes no argument; "3" is one`, "usage: hookdedup token add"},
	} {
		_, err := cli(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.usage) {
			t.Errorf("%s: %v; want it to say %q, then the usage", strings.Join(tc.args, " "), err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v; the stray argument may be a password, and is shown", strings.Join(tc.args, " "), err)
		}
	}
}

// TestCLI_UsageNamesStrayArguments: backup, restore, migrate, service and sources
// refuse a missing or stray argument, or migrate's missing --to, naming it before the
// usage; a stray database connection string is named for what it is, never shown, as
// it may hold a password.
func TestCLI_UsageNamesStrayArguments(t *testing.T) {
	cli := cliOn(filepath.Join(t.TempDir(), "t.db"))
	for _, tc := range []struct {
		args        []string
		want, usage string
	}{
		{[]string{"backup"}, "backup: FILE (or DIR/) is missing", "usage: hookdedup backup"},
		{[]string{"backup", "a.db", "b.db"}, `backup takes FILE (or DIR/); "b.db" is one too many`, "usage: hookdedup backup"},
		{[]string{"restore"}, "restore: FILE is missing", "usage: hookdedup restore"},
		{[]string{"restore", "a.db", "b.db"}, `restore takes FILE; "b.db" is one too many`, "usage: hookdedup restore"},
		{[]string{"migrate"}, "--to is required", "usage: hookdedup migrate"},
		{[]string{"migrate", "postgres://hook:hunter2@db/hook"}, "migrate takes no argument; (a database connection string, not shown) is one (the PostgreSQL database goes with --to)", "usage: hookdedup migrate"},
		{[]string{"service", "hookdedup"}, `service takes no argument; "hookdedup" is one`, "usage: hookdedup service"},
		{[]string{"sources", "ota"}, `sources takes no argument; "ota" is one`, "usage: hookdedup sources"},
	} {
		_, err := cli(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.usage) {
			t.Errorf("%s: %v; want it to say %q, then the usage", strings.Join(tc.args, " "), err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v; the connection string's password is shown", strings.Join(tc.args, " "), err)
		}
	}
}

// TestCLI_SubcommandMissing: user and token without a subcommand say that one is
// missing and which there are, as audit does ("verify or export?"), before the usage.
func TestCLI_SubcommandMissing(t *testing.T) {
	t.Chdir(t.TempDir())
	for cmd, subs := range map[string]string{"user": "add, list, role, password or remove", "token": "add, list or revoke"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{cmd}, func(string) string { return "" }, strings.NewReader(""), &out, &out)
		if err == nil || !strings.Contains(err.Error(), cmd+": which subcommand? "+subs) || !strings.Contains(err.Error(), "usage: hookdedup "+cmd) {
			t.Errorf("%s: %v; want it to name the subcommands, then the usage", cmd, err)
		}
	}
}
