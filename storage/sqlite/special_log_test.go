package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestSpecialJournalRefused: a named pipe where SQLite looks for a database's rollback
// journal is refused by open, backup and restore, naming it: SQLite, finding a journal
// there, opens it read-only to see whether it is hot, and that open waits for a writer
// for ever, past Ctrl-C.
func TestSpecialJournalRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "hookdedup.db")
	d, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	backup := filepath.Join(dir, "backup.db")
	if _, err := sqlite.BackupFile(ctx, db, backup); err != nil {
		t.Fatal(err)
	}
	// Through a link too: SQLite keeps the journal beside the file the link names.
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(db, link); err != nil {
		t.Fatal(err)
	}
	journal := db + "-journal"
	if err := syscall.Mkfifo(journal, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, step := range map[string]func() error{
		"open": func() error {
			d, err := sqlite.Open(db, sqlite.Options{})
			if err == nil {
				d.Close()
			}
			return err
		},
		"open through a link": func() error {
			d, err := sqlite.Open(link, sqlite.Options{})
			if err == nil {
				d.Close()
			}
			return err
		},
		"backup":  func() error { _, err := sqlite.BackupFile(ctx, db, filepath.Join(dir, "copy.db")); return err },
		"restore": func() error { _, err := sqlite.Restore(ctx, backup, db); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- step() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), journal+" is a named pipe") {
				t.Errorf("%s: %v; want a refusal naming %s as a named pipe", name, err, journal)
			}
		case <-time.After(10 * time.Second):
			// A process holding both ends lets the waiting open return.
			if f, err := os.OpenFile(journal, os.O_RDWR, 0); err == nil {
				f.Close()
			}
			t.Fatalf("%s: still running after 10s: it waits on the FIFO", name)
		}
	}
}
