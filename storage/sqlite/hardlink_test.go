package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// linkedDatabase makes a database file holding one delivery, with a second name (a hard
// link) in another directory, and returns both names and the open database (closed with
// the test), or skips the test where the file system has no hard links.
func linkedDatabase(t *testing.T) (path, other string, db *sqlite.DB) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "hookdedup.db")
	db = storagetest.OpenPath(t, path, sqlite.Options{})
	t.Cleanup(func() { db.Close() })
	storagetest.Record(t, db, delivery("ota", "before", "h"), day)
	other = filepath.Join(t.TempDir(), "copy.db")
	if err := os.Link(path, other); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	return path, other, db
}

// refusedForNames fails t unless err is a refusal that says the file has two names.
func refusedForNames(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: a database file with two names was taken", what)
	} else if !strings.Contains(err.Error(), "2 names (hard links)") {
		t.Errorf("%s: %v; want it to say the file has 2 names", what, err)
	}
}

// TestOpen_RefusesASecondName: a database file with another name (a hard link) is
// refused under either name, with what to do, and nothing is written beside either:
// SQLite keeps a log beside the name a program opens, and two programs on two names
// would each write their own. Once the other name is removed, it opens.
func TestOpen_RefusesASecondName(t *testing.T) {
	path, other, db := linkedDatabase(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, other} {
		for _, opt := range []sqlite.Options{{}, {MustExist: true}, {ServeLock: true}} {
			db, err := sqlite.Open(name, opt)
			if err == nil {
				db.Close()
			}
			refusedForNames(t, "open "+name, err)
			if err != nil && !strings.Contains(err.Error(), "-samefile "+name) {
				t.Errorf("open %s: %v; want it to say how to find the other names", name, err)
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

// TestReadOnlyOpens_RefuseASecondName: backup, audit and migrate open the file read-only, and
// under another name of it (a hard link) they found no log beside that name: a backup
// taken, or a migration's copy made, while serve ran on the first name left out every
// commit still in serve's log, and said nothing. They refuse such a file, as Open does.
func TestReadOnlyOpens_RefuseASecondName(t *testing.T) {
	path, other, _ := linkedDatabase(t)
	for _, name := range []string{path, other} {
		dest := filepath.Join(t.TempDir(), "backup.db")
		_, err := sqlite.BackupFile(t.Context(), name, dest)
		refusedForNames(t, "backup of "+name, err)
		if _, err := os.Lstat(dest); !os.IsNotExist(err) {
			t.Errorf("backup of %s: %s left (%v)", name, dest, err)
		}
		f, err := sqlite.OpenAuditFile(t.Context(), name, 0)
		if err == nil {
			f.Close()
		}
		refusedForNames(t, "audit of "+name, err)
		s, err := sqlite.OpenSnapshot(t.Context(), name)
		if err == nil {
			s.Close()
		}
		refusedForNames(t, "snapshot of "+name, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Lstat(other + suffix); !os.IsNotExist(err) {
			t.Errorf("%s%s left beside a refused name (%v)", other, suffix, err)
		}
	}
}
