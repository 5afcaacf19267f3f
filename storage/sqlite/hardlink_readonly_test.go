package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestReadOnlyOpens_RefuseASecondName: backup, audit and migrate open the file read-only, and
// under another name of it (a hard link) they found no log beside that name: a backup
// taken, or a migration's copy made, while serve ran on the first name left out every
// commit still in serve's log, and said nothing. They refuse such a file, as Open does.
func TestReadOnlyOpens_RefuseASecondName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	defer db.Close()
	storagetest.Record(t, db, delivery("ota", "before", "h"), day)
	other := filepath.Join(t.TempDir(), "copy.db")
	if err := os.Link(path, other); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	for _, name := range []string{path, other} {
		dest := filepath.Join(t.TempDir(), "backup.db")
		info, err := sqlite.BackupFile(t.Context(), name, dest)
		if err == nil {
			t.Errorf("backup of %s: took a copy of %d deliveries of a database file with two names", name, info.Deliveries)
		} else if !strings.Contains(err.Error(), "2 names (hard links)") {
			t.Errorf("backup of %s: %v; want it to say the file has 2 names", name, err)
		}
		if _, err := os.Lstat(dest); !os.IsNotExist(err) {
			t.Errorf("backup of %s: %s left (%v)", name, dest, err)
		}
		f, err := sqlite.OpenAuditFile(t.Context(), name, 0)
		if err == nil {
			f.Close()
			t.Errorf("audit of %s: opened a database file with two names", name)
		} else if !strings.Contains(err.Error(), "2 names (hard links)") {
			t.Errorf("audit of %s: %v; want it to say the file has 2 names", name, err)
		}
		s, err := sqlite.OpenSnapshot(t.Context(), name)
		if err == nil {
			s.Close()
			t.Errorf("snapshot of %s: opened a database file with two names", name)
		} else if !strings.Contains(err.Error(), "2 names (hard links)") {
			t.Errorf("snapshot of %s: %v; want it to say the file has 2 names", name, err)
		}
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Lstat(other + suffix); !os.IsNotExist(err) {
			t.Errorf("%s%s left beside a refused name (%v)", other, suffix, err)
		}
	}
}
