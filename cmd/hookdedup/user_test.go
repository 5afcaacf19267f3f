package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestCLI_PasswordRule: the command line refuses a password by the console's rule, in
// its words, for a new user and a new password alike.
func TestCLI_PasswordRule(t *testing.T) {
	for _, pw := range []string{"short", strings.Repeat("x", 73), "Passw\xf6rter-des-Jahres", "correct horse\x00battery", "\uFEFFcorrect horse battery"} {
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

// TestServe_FirstAdminOneTime: the password serve generates for the first admin is
// one-time; one the operator sets on the command line, the documented recovery, and one
// given with user add are not.
func TestServe_FirstAdminOneTime(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pw, err := ensureAdmin(ctx, db)
	if err != nil || pw == "" {
		t.Fatalf("ensureAdmin: %q, %v", pw, err)
	}
	mustChange := func(name string) bool {
		t.Helper()
		u, err := db.UserByName(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return u.MustChangePassword
	}
	if !mustChange("admin") {
		t.Fatal("the generated password is not one-time")
	}
	cli := func(stdin string, args ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, append(args, "--database", path), func(string) string { return "" }, strings.NewReader(stdin), &out, &errb); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
	}
	cli("the operator's password\n", "user", "password", "admin")
	if mustChange("admin") {
		t.Error("a password set with user password is one-time")
	}
	cli("rita's long password\n", "user", "add", "rita", "--role", "operator")
	if mustChange("rita") {
		t.Error("a password given with user add is one-time")
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
		if _, _, err := runIn(t, "", nil, pw, "user", "add", name, "--role", "admin"); err != nil {
			t.Errorf("user add %q: %v", name, err)
		}
	}
}

// The first user added before the first start must be an admin: serve makes the first
// admin only when there is no user at all, so a first viewer (the role user add gives
// without --role) would leave a server no one can administer, its generated secret
// out of everyone's reach.
func TestCLI_FirstUserIsAdmin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	cli := func(stdin string, args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(args, "--database", path),
			func(string) string { return "" }, strings.NewReader(stdin), &out, &errb)
		return out.String(), err
	}
	const pw = "correct horse battery\n"
	for _, args := range [][]string{{"user", "add", "ana"}, {"user", "add", "ana", "--role", "operator"}} {
		if out, err := cli(pw, args...); err == nil || !strings.Contains(err.Error(), "admin") {
			t.Errorf("%v as the first user: %v\n%s", args, err, out)
		}
	}
	if _, err := cli(pw, "user", "add", "root", "--role", "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(pw, "user", "add", "ana"); err != nil {
		t.Errorf("a viewer once an admin exists: %v", err)
	}
	out, err := cli("", "user", "list")
	if err != nil || !strings.Contains(out, "root") || !strings.Contains(out, "ana") {
		t.Errorf("user list: %v\n%s", err, out)
	}
}

// TestCLI_UserFlagsBeforeSubcommand: "user --database a.db list" is refused as a usage
// error naming the flag, as token and audit refuse it, rather than printing only the
// usage.
func TestCLI_UserFlagsBeforeSubcommand(t *testing.T) {
	flagsBeforeSubcommand(t, "user")
}

// flagsBeforeSubcommand checks that cmd (user or token) refuses a flag standing where
// its subcommand belongs, exit 2, naming the flag, and without opening any database:
// read as the subcommand, "--database a.db" named none, and the database it named was
// not the one the command went on to look for (./hookdedup.db, opened and migrated
// when it existed). The same flag after the subcommand works.
func flagsBeforeSubcommand(t *testing.T, cmd string) {
	t.Helper()
	dir := t.TempDir()
	a := filepath.Join(dir, "a.db")
	db, err := sqlite.Open(a, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, args := range [][]string{{cmd, "--database", a, "list"}, {cmd, "--database=postgres://hook:pw@db/hook", "list"}, {cmd, "-config", "x.toml", "list"}} {
		out, code := cli(t, dir, nil, "", args...)
		name, _, _ := strings.Cut(args[1], "=")
		if code != 2 || !strings.Contains(out, "hookdedup "+cmd+": flag "+name+" stands before the subcommand") ||
			!strings.Contains(out, "usage: hookdedup "+cmd) || strings.Contains(out, "no database") {
			t.Errorf("%q: exit %d, want 2 naming %s before the subcommand\n%s", args, code, name, out)
		}
		if strings.Contains(out, "pw@") {
			t.Errorf("%q: the refusal shows the database's password:\n%s", args, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "hookdedup.db")); !os.IsNotExist(err) {
		t.Errorf("a refused command line made ./hookdedup.db: %v", err)
	}
	if out, code := cli(t, dir, nil, "", cmd, "list", "--database", a); code != 0 {
		t.Errorf("%s list --database: exit %d\n%s", cmd, code, out)
	}
	if out, code := cli(t, dir, nil, "", cmd, "--help"); code != 0 || !strings.Contains(out, "usage: hookdedup "+cmd) {
		t.Errorf("%s --help: exit %d, want 0 and the usage\n%s", cmd, code, out)
	}
}

// TestCLI_UnknownSubcommand: user and token name a subcommand they do not have, as
// audit does, rather than print their usage alone.
func TestCLI_UnknownSubcommand(t *testing.T) {
	for _, args := range [][]string{{"user", "lsit"}, {"token", "delete", "3"}, {"user", "postgres://hook:S3CRETPW@db/hook", "list"}} {
		var out bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &out)
		want := fmt.Sprintf("unknown subcommand %q", args[1])
		if strings.Contains(args[1], "S3CRETPW") {
			want = "unknown subcommand (a database connection string, not shown)"
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "usage:") || strings.Contains(err.Error(), "S3CRETPW") {
			t.Errorf("%q: %v, want %s, then the usage", args[:2], err, want)
		}
	}
}

// TestCLI_UserNameCase: user add refuses a name an existing user has in another letter
// case, naming that user, as it refuses the very name.
func TestCLI_UserNameCase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	add := func(name, role string) error {
		t.Helper()
		var out, errb bytes.Buffer
		return run(context.Background(), []string{"user", "add", name, "--role", role, "--database", path},
			func(string) string { return "" }, strings.NewReader("correct horse battery staple\n"), &out, &errb)
	}
	if err := add("op1", "admin"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"op1": `user "op1" already exists`,
		"OP1": `user "op1" already exists, and "OP1" differs from it only in letter case`,
	} {
		if err := add(name, "operator"); err == nil || err.Error() != want {
			t.Errorf("user add %s: %v, want %q", name, err, want)
		}
	}
}
