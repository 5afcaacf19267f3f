package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestRestore_OntoANamedPipe: restore onto a database path that is a FIFO (a name an
// operator mistyped, or a pipe left where the database was) is refused at once, naming
// the path and what it is, and the FIFO stays as it was: opened, it would wait for a
// reader for ever, and Ctrl-C cannot end a process blocked in that open.
func TestRestore_OntoANamedPipe(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "old.db")
	db, err := sqlite.Open(src, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	backup := filepath.Join(dir, "backup.db")
	if out, err := runCmd(t, "", "backup", "--database", src, backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	target := filepath.Join(dir, "hookdedup.db")
	if err := syscall.Mkfifo(target, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"restore", "--database", target, backup},
		{"restore", "--copy", "--database", target, backup},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := runCmd(t, "", args...)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "a named pipe") {
				t.Errorf("%v: %v; want a refusal naming %s as a named pipe", args, err, target)
			}
		case <-time.After(10 * time.Second):
			// Whichever end the restore waits at, a process holding both ends lets its
			// open return, so that the test leaves nothing blocked behind.
			if f, err := os.OpenFile(target, os.O_RDWR, 0); err == nil {
				f.Close()
			}
			t.Fatalf("%v: still running after 10s: it waits on the FIFO", args)
		}
		if fi, err := os.Lstat(target); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("%v: the FIFO is no longer there as it was (%v)", args, err)
		}
	}
}

// TestBackup_OntoANamedPipe: a backup whose target is a FIFO is refused at once, naming
// it, as any target that is not a regular file is; opening it to look would wait for a
// writer for ever.
func TestBackup_OntoANamedPipe(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(src, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	target := filepath.Join(dir, "backup.db")
	if err := syscall.Mkfifo(target, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := runCmd(t, "", "backup", "--database", src, target)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "a named pipe") {
			t.Errorf("backup onto a FIFO: %v; want a refusal naming %s as a named pipe", err, target)
		}
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(target, os.O_RDWR, 0); err == nil {
			f.Close()
		}
		t.Fatal("backup onto a FIFO: still running after 10s: it waits on the FIFO")
	}
	if fi, err := os.Lstat(target); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO is no longer there as it was (%v)", err)
	}
}
