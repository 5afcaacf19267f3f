package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestRestore_OntoReadOnlyDirectory: a restore over a database in a directory it cannot
// write (a read-only mount; a directory of another user, run without sudo -u) says so,
// naming the directory. It said that the delivery ids the database issued could not be
// read ("unable to open database file: no such file or directory") and advised moving
// the database aside, which would give up those ids for nothing. Needs root (it mounts a
// tmpfs); skipped without.
func TestRestore_OntoReadOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	db := backedUp(t, filepath.Join(dir, "old.db"), backup, numberedKeys(3)...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	live := filepath.Join(mnt, "hookdedup.db")
	db = backedUp(t, live, filepath.Join(dir, "live-backup.db"), numberedKeys(5)...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("", mnt, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	_, err = sqlite.Restore(context.Background(), backup, live)
	if err == nil || !strings.Contains(err.Error(), "its directory "+mnt+" is not writable") || strings.Contains(err.Error(), "move it aside") {
		t.Errorf("restore onto a read-only directory: %v\nwant the directory %s named as not writable", err, mnt)
	}
	if after, err := os.ReadFile(live); err != nil || string(after) != string(before) {
		t.Errorf("the database after the refused restore: %d bytes, %v; want it as it was", len(after), err)
	}
}
