package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOpen_RefusesASecondName: a database file with another name (a hard link) is
// refused under either name, with what to do, and nothing is written beside either:
// SQLite keeps a log beside the name a program opens, and two programs on two names
// would each write their own. Once the other name is removed, it opens.
func TestOpen_RefusesASecondName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	storagetest.Record(t, db, delivery("ota", "before", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "copy.db")
	if err := os.Link(path, other); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	for _, name := range []string{path, other} {
		for _, opt := range []sqlite.Options{{}, {MustExist: true}, {ServeLock: true}} {
			db, err := sqlite.Open(name, opt)
			if err == nil {
				db.Close()
				t.Fatalf("open %s %+v: opened a database file with two names", name, opt)
			}
			if msg := err.Error(); !strings.Contains(msg, "2 names (hard links)") || !strings.Contains(msg, "-samefile "+name) {
				t.Errorf("open %s: %v; want it to say the file has 2 names and how to find them", name, err)
			}
		}
		for _, suffix := range []string{"-wal", "-shm", sqlite.ServeLockSuffix} {
			if _, err := os.Lstat(name + suffix); !os.IsNotExist(err) {
				t.Errorf("%s%s left beside a refused name (%v)", name, suffix, err)
			}
		}
	}
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	db = storagetest.OpenPath(t, path, sqlite.Options{MustExist: true})
	defer db.Close()
	if c, err := storagetest.CountDeliveries(t.Context(), db, ""); err != nil || c.Accepted != 1 {
		t.Errorf("after the other name is removed: %+v (%v), want the delivery stored before", c, err)
	}
}
