package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cliFor runs a subcommand of the binary in dir for at most d, and returns its output,
// its exit code, and whether it was still running when d ran out (and was killed): a
// serve that should have refused its command line and started instead ends, and its
// test fails rather than hangs.
func cliFor(t *testing.T, dir string, d time.Duration, args ...string) (string, int, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, hookdedupBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), -1, true
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode(), false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0, false
}

// TestCLI_FlagsOnlyCommandsRefuseArguments: serve, keys and demo take flags only. An
// argument given where a flag was meant ("serve 127.0.0.1:9000", "keys pms") is a usage
// error that names it and the flag it was likely meant for, with the exit status of the
// other commands' usage errors, before the configuration is read or a database opened:
// not a server on the default address and a new database, nor every source's keys.
func TestCLI_FlagsOnlyCommandsRefuseArguments(t *testing.T) {
	// The exit status every other command gives a stray argument.
	out, usageCode := cli(t, t.TempDir(), nil, "", "sources", "stray")
	if usageCode == 0 {
		t.Fatalf("sources with a stray argument exited 0:\n%s", out)
	}

	withKeys := t.TempDir() // a database that keys would list without a word
	if out, code := cli(t, withKeys, nil, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	for _, tc := range []struct {
		name  string
		dir   string
		args  []string
		want  string // the argument and the flag it was meant for
		empty bool   // dir starts empty, and must stay so
	}{
		{"ServeAddress", "", []string{"serve", "127.0.0.1:0", "--addr", "127.0.0.1:0"}, `"127.0.0.1:0"`, true},
		{"ServeAddressHint", "", []string{"serve", "127.0.0.1:9000"}, "--addr 127.0.0.1:9000", true},
		{"ServeConfigFile", "", []string{"serve", "other.toml"}, "--config other.toml", true},
		{"ServeDatabaseFile", "", []string{"serve", "other.db"}, "--database other.db", true},
		// Refused before the configuration is read: the argument is the mistake to fix first.
		{"ServeBeforeConfig", "", []string{"serve", "--config", "missing.toml", "127.0.0.1:0"}, `"127.0.0.1:0"`, true},
		{"ServeDatabaseURL", "", []string{"serve", "postgres://hook:s3cret@127.0.0.1:1/hook"}, "--database postgres://hook:xxxxx@127.0.0.1:1/hook", true},
		{"Keys", withKeys, []string{"keys", "pms"}, "--source pms", false},
		{"KeysStuck", withKeys, []string{"keys", "--stuck", "pms"}, "--source pms", false},
		{"KeysNoDatabase", "", []string{"keys", "pms"}, "--source pms", true},
		{"Demo", withKeys, []string{"demo", "pms", "--url", "http://127.0.0.1:1"}, "--source pms", false},
		{"DemoURL", withKeys, []string{"demo", "http://127.0.0.1:1"}, "--url http://127.0.0.1:1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = t.TempDir()
			}
			out, code, running := cliFor(t, dir, 10*time.Second, tc.args...)
			if running || code != usageCode {
				t.Errorf("%v: still running %v, exit %d; want exit %d, as other commands' usage errors:\n%s", tc.args, running, code, usageCode, out)
			}
			if !strings.Contains(out, "unexpected argument") || !strings.Contains(out, tc.want) {
				t.Errorf("%v: want an error naming the stray argument and %s:\n%s", tc.args, tc.want, out)
			}
			if strings.Contains(out, "s3cret") {
				t.Errorf("%v: the error shows the URL's password:\n%s", tc.args, out)
			}
			if tc.empty {
				if left, _ := os.ReadDir(dir); len(left) > 0 {
					t.Errorf("%v left %s behind", tc.args, filepath.Join(dir, left[0].Name()))
				}
			}
		})
	}
}

// TestCLI_StrayConnectionStringNotShown: serve, keys and demo refuse a positional
// argument by quoting it back, but never a database connection string in a form that
// may hold its password anywhere (keyword form, a postgres: URL without //,
// USER:PASSWORD@HOST without a scheme, a JDBC URL, a postgres:// URL with a blank before
// it as a badly quoted "$DB" gives): its refusal says what it is, not what it says, to a
// terminal or a unit's journal, and points at --database.
func TestCLI_StrayConnectionStringNotShown(t *testing.T) {
	dir := t.TempDir()
	for _, arg := range []string{
		"host=db.internal dbname=hook user=hook password=s3cretPW",
		"postgres:hook:s3cretPW@db.internal/hook",
		"hook:s3cretPW@db.internal/hook",
		"jdbc:postgresql://db.internal:5432/hook?user=hook&password=s3cretPW",
		" postgres://hook:s3cretPW@db.internal/hook",
	} {
		for _, cmd := range []string{"serve", "keys", "demo"} {
			out, code, hung := cliFor(t, dir, 20*time.Second, cmd, arg)
			if hung || code == 0 {
				t.Errorf("%s %q: exit %d, hung %v; want a refusal\n%s", cmd, arg, code, hung, out)
				continue
			}
			if strings.Contains(out, "s3cretPW") || !strings.Contains(out, "--database") {
				t.Errorf("%s with a stray connection string: the refusal shows its password, or does not say --database:\n%s", cmd, strings.TrimSpace(out))
			}
		}
	}
}

// TestConfig_JDBCDatabaseRefused: a JDBC URL given as --database is refused, not taken
// for a SQLite file named after it (password and all), and its password is not shown.
func TestConfig_JDBCDatabaseRefused(t *testing.T) {
	dir := t.TempDir()
	const db = "jdbc:postgresql://db.internal:5432/hook?user=hook&password=s3cretPW"
	out, code, hung := cliFor(t, dir, 5*time.Second, "serve", "--addr", "127.0.0.1:0", "--database", db)
	if hung || code == 0 || strings.Contains(out, "s3cretPW") {
		t.Errorf("serve --database <JDBC URL>: exit %d, hung (served) %v; want a refusal that does not show the password:\n%s", code, hung, strings.TrimSpace(out))
	}
	out, code, _ = cliFor(t, dir, 5*time.Second, "keys", "--database", db)
	if code == 0 || strings.Contains(out, "s3cretPW") {
		t.Errorf("keys --database <JDBC URL>: exit %d; the message shows the password:\n%s", code, strings.TrimSpace(out))
	}
}

// TestBackup_ServerURLForAFile: backup and restore take a FILE; a postgres:// URL in
// its place (an operator who thinks backup takes the database's URL) is refused without
// its password, and nothing is written under a path named after it.
func TestBackup_ServerURLForAFile(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", "a.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	const url = "postgres://hook:s3cretPW@db.internal/hook"
	for _, cmd := range []string{"backup", "restore"} {
		out, code := cli(t, dir, nil, "", cmd, "--database", "a.db", url)
		if code == 0 || strings.Contains(out, "s3cretPW") {
			t.Errorf("%s --database a.db <postgres URL>: exit %d; want a refusal that does not show the password:\n%s", cmd, code, strings.TrimSpace(out))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres:")); err == nil {
		t.Errorf("backup made a directory postgres:/hook:s3cretPW@db.internal/ holding a SQLite copy: the password is on disk as a path")
	}
}

// TestBackup_EmptyFileArgumentRefused: an empty FILE, as "$BACKUP" gives it with the
// variable unset, is refused as such, before any copy, by backup and restore; and so is
// audit export --output "", which would otherwise write the log to stdout.
func TestBackup_EmptyFileArgumentRefused(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", "a.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"backup", "--database", "a.db", ""}, 1, "backup: FILE is empty (an unset variable?)"},
		{[]string{"restore", "--database", "restored.db", ""}, 1, "restore: FILE is empty (an unset variable?)"},
		{[]string{"audit", "export", "--format", "csv", "--database", "a.db", "--output", ""}, 2, "--output is empty (an unset variable?)"},
	} {
		out, code := cli(t, dir, nil, "", tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%q: exit %d\n%s\nwant exit %d saying %q", tc.args, code, out, tc.code, tc.want)
		}
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 1 {
		t.Errorf("the directory holds %v afterwards (%v), want a.db only", ents, err)
	}
}

// TestCLI_HelpMentionsRestoreCopy: `hookdedup help` lists each command with what it
// takes; restore's line names --copy, the README's rehearsal.
func TestCLI_HelpMentionsRestoreCopy(t *testing.T) {
	out, _ := cli(t, t.TempDir(), nil, "", "help")
	for line := range strings.Lines(out) {
		if strings.HasPrefix(strings.TrimSpace(line), "restore ") {
			if !strings.Contains(line, "--copy") {
				t.Errorf("hookdedup help: the restore line does not mention --copy: %q", line)
			}
			return
		}
	}
	t.Errorf("hookdedup help lists no restore:\n%s", out)
}

// TestCLI_HelpForACommand: `hookdedup help keys` answers what `keys --help` does, on
// stdout and with success, since help was asked for; it printed the general usage,
// which lists no command's flags. An unknown name is refused, naming it, and nothing
// is run or made.
func TestCLI_HelpForACommand(t *testing.T) {
	t.Chdir(t.TempDir())
	help := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	for _, c := range []struct {
		name, want string
	}{
		{"keys", "-stuck"},
		{"serve", "-addr"},
		{"demo", "-events"},
		{"user", "hookdedup user add NAME"},
		{"audit", "hookdedup audit verify"},
	} {
		out, errOut, err := help("help", c.name)
		if err != nil || !strings.Contains(out, c.want) || errOut != "" {
			t.Errorf("help %s: %v\nstdout:\n%s\nstderr:\n%s\nwant its usage, naming %s, on stdout", c.name, err, out, errOut, c.want)
		}
	}
	if out, _, err := help("help", "nosuch"); err == nil || !strings.Contains(err.Error(), `"nosuch"`) || out != "" {
		t.Errorf("help nosuch: %v, stdout %q; want it refused, naming it", err, out)
	}
	if _, _, err := help("help", "keys", "serve"); err == nil || !strings.Contains(err.Error(), "one command") {
		t.Errorf("help keys serve: %v; want it refused: help takes one command", err)
	}
	if out, _, err := help("help"); err != nil || !strings.Contains(out, "commands:") {
		t.Errorf("help: %v\n%s\nwant the general usage", err, out)
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Errorf("%d files made, want none", len(entries))
	}
}

// TestCLI_VersionTakesNoArgument: `hookdedup version extra` printed the version and
// succeeded, as if the word were not there; a script that meant another command learnt
// nothing. It is refused, naming the argument.
func TestCLI_VersionTakesNoArgument(t *testing.T) {
	for _, args := range [][]string{{"version", "extra"}, {"--version", "--json"}} {
		var out bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &out)
		if err == nil || !strings.Contains(err.Error(), strings.TrimLeft(args[1], "-")) {
			t.Errorf("%q: %v\n%s\nwant it refused, naming %q", args, err, out.String(), args[1])
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, func(string) string { return "" }, strings.NewReader(""), &out, &out); err != nil || !strings.HasPrefix(out.String(), "hookdedup ") {
		t.Errorf("version: %v, %q", err, out.String())
	}
}
