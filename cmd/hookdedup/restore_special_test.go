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

// TestFIFOsRefused: a database, or a file backup and restore are to write, that is a
// FIFO (a name an operator mistyped, or a pipe left where a database was) is refused at
// once, naming the path and what it is, and the FIFO stays as it was: opened to be
// looked at, it would wait for the other end for ever, and Ctrl-C cannot end a process
// blocked in that open; SQLite, opening it for writing, fails on its first seek.
func TestFIFOsRefused(t *testing.T) {
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
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"restore", "--database", fifo, backup},
		{"restore", "--copy", "--database", fifo, backup},
		{"backup", "--database", src, fifo},
		{"backup", "--database", fifo, filepath.Join(dir, "copy.db")},
		{"keys", "--database", fifo},
		{"release", "--database", fifo, "--source", "ota", "--reason", "a test", "evt_1"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := runCmd(t, "", args...)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "a named pipe") {
				t.Errorf("%v: %v; want a refusal naming %s as a named pipe", args, err, fifo)
			}
		case <-time.After(10 * time.Second):
			// Whichever end the command waits at, a process holding both ends lets its
			// open return, so that the test leaves nothing blocked behind.
			if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				f.Close()
			}
			t.Fatalf("%v: still running after 10s: it waits on the FIFO", args)
		}
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("%v: the FIFO is no longer there as it was (%v)", args, err)
		}
	}
}
