package sqlite_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOpen_RefusesToCreateBesideALogThatHoldsCommits: the database file was moved or
// removed without its -wal (mv hookdedup.db elsewhere after a crash, a restore killed
// between its renames), and serve starts on the path. Creating an empty database there
// would have SQLite delete that -wal at its first read, with the commits it alone
// holds, and serve would accept every redelivery of them as new. The open is refused,
// naming the log, which is left as it was.
func TestOpen_RefusesToCreateBesideALogThatHoldsCommits(t *testing.T) {
	db := storagetest.Open(t)
	for _, key := range []string{"evt_1", "evt_2", "evt_3"} {
		storagetest.Record(t, db, delivery("ota", key, "h"), day)
	}
	wal, err := os.ReadFile(db.Path() + "-wal")
	if err != nil || len(wal) == 0 {
		t.Fatalf("the live database's -wal: %d bytes, %v", len(wal), err)
	}
	for _, suffix := range []string{"-wal", "-journal"} {
		t.Run(suffix, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hookdedup.db")
			if err := os.WriteFile(path+suffix, wal, 0o600); err != nil {
				t.Fatal(err)
			}
			opened, err := sqlite.Open(path, sqlite.Options{})
			if err == nil {
				opened.Close()
				t.Fatalf("opened a new database beside a %s that holds commits", suffix)
			}
			if !strings.Contains(err.Error(), path+suffix+" holds transactions") {
				t.Errorf("the refusal: %v\nwant it to name %s", err, path+suffix)
			}
			if left, err := os.ReadFile(path + suffix); err != nil || !bytes.Equal(left, wal) {
				t.Errorf("the %s after the refused open: %d bytes (%v), want the %d it held", suffix, len(left), err, len(wal))
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("a refused open left a database file at %s", path)
			}
		})
	}
}
