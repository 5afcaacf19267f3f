package main

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// underUmask returns the built binary's command with args, run in dir under umask 000 by
// a shell, so that the umask of the test process, which every test shares, stays as it
// is. Under umask 000 a file created with the default mode is readable by everyone: only
// an explicit mode keeps it private.
func underUmask(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", `umask 000 && exec "$@"`, "sh", hookdedupBinary(t)}, args...)...)
	cmd.Dir = dir
	return cmd
}

// runUnderUmask runs underUmask's command to its end and fails the test unless it exits 0.
func runUnderUmask(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := underUmask(t, dir, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hookdedup %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func wantMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Error(err)
		return
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %#o, want %#o", path, got, want)
	}
}

// The database, its -wal and -shm, backups, a restored database and the directories
// hookdedup makes are private to its user, whatever the umask.
func TestFiles_Private(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join("state", "hookdedup", "hookdedup.db")

	serve := underUmask(t, dir, "serve", "--addr", "127.0.0.1:0", "--database", dbPath)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	serve.Stderr = &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill() })
	listening := make(chan bool, 1)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "hookdedup listening on ") {
				listening <- true
			}
		}
		exited <- serve.Wait()
	}()
	select {
	case <-listening:
	case err := <-exited:
		t.Fatalf("serve exited before listening: %v\n%s", err, log.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not listen within 60s")
	}
	db := filepath.Join(dir, dbPath)
	for _, name := range []string{db, db + "-wal", db + "-shm"} {
		wantMode(t, name, 0o600)
	}
	wantMode(t, filepath.Join(dir, "state"), 0o700)
	wantMode(t, filepath.Join(dir, "state", "hookdedup"), 0o700)

	// Backups, taken while serve runs: into a file, and into directories made for them.
	runUnderUmask(t, dir, "", "backup", "--database", dbPath, "copy.db")
	wantMode(t, filepath.Join(dir, "copy.db"), 0o600)
	runUnderUmask(t, dir, "", "backup", "--database", dbPath, "backups/daily/")
	wantMode(t, filepath.Join(dir, "backups"), 0o700)
	wantMode(t, filepath.Join(dir, "backups", "daily"), 0o700)
	made, err := filepath.Glob(filepath.Join(dir, "backups", "daily", "hookdedup-*.db"))
	if err != nil || len(made) != 1 {
		t.Fatalf("backups/daily/ holds %v (%v), want one backup", made, err)
	}
	wantMode(t, made[0], 0o600)

	serve.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM\n%s", err, log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20s of SIGTERM")
	}

	// A database restored where there was none.
	fresh := t.TempDir()
	runUnderUmask(t, fresh, "", "restore", filepath.Join(dir, "copy.db"))
	wantMode(t, filepath.Join(fresh, "hookdedup.db"), 0o600)

	// user add, the way to set up the first admin before the first start, makes one.
	empty := t.TempDir()
	runUnderUmask(t, empty, "a long enough password\n", "user", "add", "ana", "--role", "admin")
	wantMode(t, filepath.Join(empty, "hookdedup.db"), 0o600)
}

// Commands that read or change a database never create one: run where there is none,
// they say so, exit 2 and leave the directory as it was.
func TestCLI_NoDatabase(t *testing.T) {
	const here = "hookdedup: no database at ./hookdedup.db (serve creates it; pass --database or --config)\n"
	tests := []struct {
		args  []string
		stdin string
		env   []string
		want  string
	}{
		{args: []string{"keys"}, want: here},
		{args: []string{"keys", "--stuck"}, want: here},
		{args: []string{"key", "--source", "ota"}, stdin: `{"event_id":"e1"}`, want: here},
		{args: []string{"release", "--source", "ota", "k1", "--reason", "stuck"}, want: here},
		{args: []string{"release", "--source", "ota", "--stuck", "--reason", "stuck"}, want: here},
		{args: []string{"user", "list"}, want: here},
		{args: []string{"user", "role", "admin", "viewer"}, want: here},
		{args: []string{"user", "password", "admin"}, stdin: "a long enough password\n", want: here},
		{args: []string{"user", "remove", "admin"}, want: here},
		{args: []string{"token", "add", "admin", "--name", "ci"}, want: here},
		{args: []string{"token", "list"}, want: here},
		{args: []string{"token", "revoke", "1"}, want: here},
		{args: []string{"backup", "copy.db"}, want: here},
		{args: []string{"backup", "--keep", "3", "backups/"}, want: here},
		// The zero-config source's secret is kept in the database.
		{args: []string{"demo", "--url", "http://127.0.0.1:1", "--events", "1"}, want: here},
		// The path as it was given, readable as a path.
		{args: []string{"keys", "--database", "data/hookdedup.db"},
			want: "hookdedup: no database at ./data/hookdedup.db (serve creates it; pass --database or --config)\n"},
		{args: []string{"user", "list", "--database", "my hookdedup.db"},
			want: `hookdedup: no database at "./my hookdedup.db" (serve creates it; pass --database or --config)` + "\n"},
		{args: []string{"token", "list"}, env: []string{"HOOKDEDUP_DATABASE=/nonexistent/hookdedup.db"},
			want: "hookdedup: no database at /nonexistent/hookdedup.db (serve creates it; pass --database or --config)\n"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			out, code := cli(t, dir, tc.env, tc.stdin, tc.args...)
			if code != 2 || out != tc.want {
				t.Errorf("exit %d, output:\n%s\nwant exit 2 and:\n%s", code, out, tc.want)
			}
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
				t.Errorf("the directory holds %v afterwards (%v), want nothing", ents, err)
			}
		})
	}

	// A config that holds every secret lets demo run with no database, and make none.
	t.Run("DemoWithSecretsInConfig", func(t *testing.T) {
		dir := t.TempDir()
		cfg := filepath.Join(t.TempDir(), "hookdedup.toml")
		if err := os.WriteFile(cfg, []byte("[[source]]\nname = \"ota\"\nsignature = \"standard-webhooks\"\n"+
			"secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\nevent_id = \"/event_id\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := cli(t, dir, nil, "", "demo", "--config", cfg, "--url", "http://127.0.0.1:1", "--events", "1")
		if code != 1 || strings.Contains(out, "no database") {
			t.Errorf("demo against a closed port: exit %d, output:\n%s\nwant exit 1 for the refused connection", code, out)
		}
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Errorf("the directory holds %v afterwards (%v), want nothing", ents, err)
		}
	})
}

// TestFiles_ReadOnlyDirectoryNamed: a database that is there, on a read-only file
// system (a snapshot, a stick mounted read-only), cannot be opened where SQLite must
// write its -wal and -shm beside it: by the commands that open it, and by audit verify
// when a WAL holds commits (a closed database alone it reads as it is). The refusal
// names the directory and says it is on a read-only file system, rather than SQLite's
// "no such file or directory" about a file that exists. It mounts a tmpfs, so it needs
// root, and is skipped without.
func TestFiles_ReadOnlyDirectoryNamed(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	closed, crashed := filepath.Join(mnt, "closed.db"), filepath.Join(mnt, "crashed.db")
	for _, db := range []string{closed, crashed} {
		if out, code := cli(t, mnt, nil, "a long enough password\n", "user", "add", "ana", "--role", "admin", "--database", db); code != 0 {
			t.Fatalf("user add: %d\n%s", code, out)
		}
	}
	// A commit still in the WAL, as a crash leaves it: the WAL is copied while the
	// connection is open.
	wal := walAsACrashLeavesIt(t, crashed, `INSERT INTO settings (name, value) VALUES ('in_the_wal', 'x')`)
	writeFile(t, crashed+"-wal", wal)
	if err := syscall.Mount("", mnt, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"keys", "--database", closed}, 1},
		{[]string{"user", "list", "--database", closed}, 1},
		{[]string{"keys", "--database", crashed}, 1},
		{[]string{"audit", "verify", "--database", crashed}, 2},
	} {
		out, code := cli(t, t.TempDir(), nil, "", tc.args...)
		if code != tc.code || strings.Contains(out, "no such file or directory") ||
			!strings.Contains(out, "its directory "+mnt+" is not writable (read-only file system)") {
			t.Errorf("hookdedup %s on a database on a read-only file system: exit %d\n%s\nwant exit %d naming the directory as read-only",
				strings.Join(tc.args, " "), code, out, tc.code)
		}
	}
	if out, code := cli(t, t.TempDir(), nil, "", "audit", "verify", "--database", closed); code != 0 {
		t.Errorf("audit verify of a closed database on a read-only file system: exit %d\n%s", code, out)
	}
}
