package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
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

// TestOpen_ServeLockPlantedLink: the database's directory is the service user's, who
// can put anything where the serve lock goes. A serve run as root that followed a link
// there would open, chmod 0600, give to that user and truncate whatever file the link
// names (/etc/shadow): the lock is refused instead, and the file the link names is left
// as it was. So is a hard link to another file. Needs root; skipped without.
func TestOpen_ServeLockPlantedLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the link is only dangerous to a process that may write anywhere")
	}
	const uid, gid = 65534, 65534 // nobody
	for _, kind := range []string{"Symlink", "HardLink"} {
		t.Run(kind, func(t *testing.T) {
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
			victim := filepath.Join(t.TempDir(), "shadow")
			if err := os.WriteFile(victim, []byte("root:secret\n"), 0o640); err != nil {
				t.Fatal(err)
			}
			plant := os.Symlink
			if kind == "HardLink" {
				plant = os.Link
			}
			if err := plant(victim, path+sqlite.ServeLockSuffix); err != nil {
				t.Fatal(err)
			}

			db, err = sqlite.Open(path, sqlite.Options{MustExist: true, ServeLock: true})
			if err == nil {
				db.Close()
				t.Error("a serve lock that is a link to another file was taken")
			} else if !strings.Contains(err.Error(), sqlite.ServeLockSuffix) {
				t.Errorf("refusal %q does not name the serve lock", err)
			}
			fi, err := os.Stat(victim)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			b, _ := os.ReadFile(victim)
			if st.Uid != 0 || st.Gid != 0 || fi.Mode().Perm() != 0o640 || string(b) != "root:secret\n" {
				t.Errorf("the linked file became %d:%d, mode %v, holding %q; want root's, 0640, as it was",
					st.Uid, st.Gid, fi.Mode().Perm(), b)
			}
		})
	}
}
