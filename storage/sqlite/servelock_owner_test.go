package sqlite_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestOpen_ServeLockOwnedAsDatabase: a serve run as root on a database that belongs to
// another user (an operator trying the service's configuration with sudo) leaves the
// serve lock to the database's owner, as SQLite leaves the -wal and -shm it makes as
// root. A lock file of root's, 0600, would keep the service's own serve from starting
// on its own database from then on. Needs root; skipped without.
func TestOpen_ServeLockOwnedAsDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root makes a file that another user's database sits beside")
	}
	const uid, gid = 65534, 65534 // nobody
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{dir, path} {
		if err := os.Chown(name, uid, gid); err != nil {
			t.Fatal(err)
		}
	}

	db, err = sqlite.Open(path, sqlite.Options{MustExist: true, ServeLock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock := path + sqlite.ServeLockSuffix
	fi, err := os.Stat(lock)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uid || st.Gid != gid || fi.Mode().Perm() != 0o600 {
		t.Errorf("serve lock made by root beside a database of %d:%d: owned by %d:%d, mode %v; want the database's owner, 0600",
			uid, gid, st.Uid, st.Gid, fi.Mode().Perm())
	}
}
