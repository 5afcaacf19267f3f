package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestOpen_ReadOnlyDirectoryThroughLinkNamed: an open that fails because SQLite cannot
// write the -wal and -shm beside the database names that directory as not writable. For
// a database configured as a symbolic link, that is the directory of the file the link
// leads to, where SQLite writes them, not the link's. Needs root (it mounts a tmpfs);
// skipped without.
func TestOpen_ReadOnlyDirectoryThroughLinkNamed(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	real := filepath.Join(mnt, "hookdedup.db")
	db, err := sqlite.Open(real, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("", mnt, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	// The premise: named directly, the refusal names the read-only directory.
	if _, err := sqlite.Open(real, sqlite.Options{MustExist: true}); err == nil || !strings.Contains(err.Error(), "is not writable") {
		t.Fatalf("open %s on a read-only mount: %v; want the directory named as not writable", real, err)
	}
	link := filepath.Join(t.TempDir(), "db.sqlite")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(link, sqlite.Options{MustExist: true})
	if err == nil || !strings.Contains(err.Error(), "its directory "+mnt+" is not writable") {
		t.Errorf("open %s (a link to %s, on a read-only mount): %v\nwant the read-only directory %s named, where SQLite must write the -wal and -shm",
			link, real, err, mnt)
	}
}
