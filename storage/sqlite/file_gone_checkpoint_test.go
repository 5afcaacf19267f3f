package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_DirectoryRemovedLogsOnce: once the database's directory is removed while open,
// the log says so once, with what to do (restart with the file back in place). The
// checkpointer, woken by the commit that found the file gone, must not add a line of
// its own that points the operator at the disk: a checkpoint cannot copy into a file
// that has left, and the restart is what mends it.
func TestDB_DirectoryRemovedLogsOnce(t *testing.T) {
	var log logBuffer
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	storagetest.Record(t, db, delivery("ota", "evt_before", "h"), day)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// The first delivery after commits before the writer looks again (the file it has
	// open takes the commit), so it wakes the checkpointer; it and the next are refused.
	for i := range 2 {
		if err := db.Record(context.Background(), delivery("ota", fmt.Sprintf("evt_after_%d", i), "h"), day); !errors.Is(err, storage.ErrFileGone) {
			t.Fatalf("delivery %d after the directory was removed: %v, want ErrFileGone", i, err)
		}
	}
	// The checkpointer, woken by that commit, makes its pass, finds the file gone and
	// stops: only then has it had its chance to log.
	storagetest.Eventually(t, 10*time.Second, func() error {
		if !db.CheckpointerStopped() {
			return errors.New("the checkpointer has not stopped")
		}
		return nil
	})

	var named []string
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, path) {
			named = append(named, line)
		}
	}
	if len(named) != 1 || !strings.Contains(named[0], "level=ERROR") || !strings.Contains(named[0], "restarted") {
		t.Errorf("log lines naming %s: %q; want one error that says a restart is needed", path, named)
	}
}
