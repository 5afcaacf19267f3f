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

// TestRestore_InterruptedWhileReadingAPipe: a restore from a pipe (<(gunzip -c …))
// whose writer stalls ends when its context does (Ctrl-C), saying it was interrupted,
// rather than wait in the read for as long as the writer keeps the pipe open; the
// database path is left as it was.
func TestRestore_InterruptedWhileReadingAPipe(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "backup.pipe")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "hookdedup.db")
	// The writer sends the start of a database and then stalls, holding its end open
	// until the test ends.
	stalled := make(chan struct{})
	defer close(stalled)
	go func() {
		w, err := os.OpenFile(pipe, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		w.Write(append([]byte("SQLite format 3\x00"), make([]byte, 4080)...))
		<-stalled
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sqlite.Restore(ctx, pipe, target)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Errorf("restore from a stalled pipe, interrupted: %v; want it said to be interrupted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("restore from a stalled pipe still reads it 10 s after its context ended")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the database path after an interrupted restore: %v; want nothing there", err)
	}
}
