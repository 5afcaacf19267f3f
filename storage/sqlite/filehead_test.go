package sqlite_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestIsDatabaseFile_NotARegularFile: a path that names a FIFO (an --output an operator
// points at a pipe) is no database, answered at once: opening it to read would wait for
// a writer for ever.
func TestIsDatabaseFile_NotARegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { done <- sqlite.IsDatabaseFile(path) }()
	select {
	case is := <-done:
		if is {
			t.Fatal("a FIFO is taken for a database")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("IsDatabaseFile waits on a FIFO")
	}
}
