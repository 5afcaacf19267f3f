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

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestAudit_ExportNotOverADatabaseOrTheConfig: --output over a SQLite database other
// than the one read (a backup, a copy kept aside by a restore) or over the
// configuration file is refused, naming what the file is, and the file is left as it
// was: a slip in a path (backups/ where exports/ was meant) would replace a backup
// with an export. A previous export, or any other file, is written over as before.
func TestAudit_ExportNotOverADatabaseOrTheConfig(t *testing.T) {
	dir := t.TempDir()
	path := auditDB(t, dir)
	backup := filepath.Join(dir, "hookdedup-2026-12-07.db")
	if out, code := cli(t, dir, nil, "", "backup", "--database="+path, backup); code != 0 {
		t.Fatalf("backup: exit %d\n%s", code, out)
	}
	config := filepath.Join(dir, "hookdedup.toml")
	writeFile(t, config, []byte("database = \""+path+"\"\n"))
	for _, c := range []struct{ file, want string }{{backup, "a SQLite database"}, {config, "the configuration file"}} {
		file, want := c.file, c.want
		before, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out, code := cli(t, dir, nil, "", "audit", "export", "--config", config, "--format", "csv", "--output", file)
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("export over %s: exit %d, want a refusal saying it is %s\n%s", filepath.Base(file), code, want, out)
		}
		if after, _ := os.ReadFile(file); string(after) != string(before) {
			t.Errorf("export over %s changed it", filepath.Base(file))
		}
	}
	previous := filepath.Join(dir, "audit.csv")
	writeFile(t, previous, []byte("an earlier export\n"))
	if out, code := cli(t, dir, nil, "", "audit", "export", "--config", config, "--format", "csv", "--output", previous); code != 0 {
		t.Fatalf("export over a previous export: exit %d\n%s", code, out)
	}
	if after, _ := os.ReadFile(previous); !strings.Contains(string(after), "previous_state") {
		t.Errorf("the previous export was not written over: %q", after)
	}
}

// TestAudit_ExportNotOverTheServeLock: --output (and a backup's FILE) naming the serve
// lock beside the database is refused, and the lock stays the file serve holds: an
// export renamed over it would leave serve holding a file no longer there, and a
// second serve would lock the new one and run on the same database.
func TestAudit_ExportNotOverTheServeLock(t *testing.T) {
	dir := t.TempDir()
	path := auditDB(t, dir)
	serving, err := sqlite.Open(path, sqlite.Options{ServeLock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer serving.Close()
	lock := path + sqlite.ServeLockSuffix
	held, err := os.Stat(lock)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"audit", "export", "--format", "csv", "--output", lock},
		{"backup", lock},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(args, "--database", path), func(string) string { return "" },
			strings.NewReader(""), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "serve lock") {
			t.Errorf("%s over the serve lock: %v, want a refusal naming it", args[0], err)
		}
		if now, err := os.Stat(lock); err != nil || !os.SameFile(held, now) {
			t.Fatalf("%s over the serve lock replaced it (%v)", args[0], err)
		}
	}
	second, err := sqlite.Open(path, sqlite.Options{ServeLock: true})
	if err == nil {
		second.Close()
	}
	if !errors.Is(err, sqlite.ErrServed) {
		t.Errorf("a second serve after the refused export: %v, want it refused as served", err)
	}
}

// TestAudit_ExportNotOverASpecialFile: --output naming a FIFO or a device (/dev/null,
// to try an export without keeping it) is refused, and the file stays what it was: the
// export is renamed into place, which would put a regular file of the audit log where
// the device was, and, run as root, break every program that writes to /dev/null.
func TestAudit_ExportNotOverASpecialFile(t *testing.T) {
	dir := t.TempDir()
	path := auditDB(t, dir)
	fifo := filepath.Join(dir, "audit.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"audit", "export", "--format", "csv", "--output", fifo, "--database", path},
		func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("export over a FIFO: %v, want a refusal saying it is not a regular file", err)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("export over a FIFO replaced it (%v)", err)
	}
}
