package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// A restore killed after it linked the database aside, before it renamed the restored
// file over it, leaves the live database under the kept-aside name too: the same file,
// which every later write would change while it passed for the copy the restore
// replaced. The next open removes that name; a copy kept aside for real stays.
func TestOpen_DropsAKeptAsideNameOfTheDatabaseItself(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.db")
	storagetest.OpenPath(t, path, sqlite.Options{}).Close()
	alias := path + ".before-restore-20261206T120000Z"
	if err := os.Link(path, alias); err != nil {
		t.Fatal(err)
	}
	kept := path + ".before-restore-20261205T120000Z"
	storagetest.OpenPath(t, kept, sqlite.Options{}).Close()

	db := storagetest.OpenPath(t, path, sqlite.Options{})
	defer db.Close()
	if _, err := os.Lstat(alias); !os.IsNotExist(err) {
		t.Errorf("the kept-aside name of the database itself is still there (%v)", err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a copy kept aside for real is gone: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database: %v", err)
	}
}
