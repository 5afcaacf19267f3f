package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// A backup's file given as a symbolic link whose target is missing (the link to a disk
// that is not mounted) is refused, naming the link and its target: written in the
// link's place, the backup would stay on the disk the link was made to leave, and the
// link be gone.
func TestBackup_RefusesDanglingLink(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	storagetest.OpenPath(t, live, sqlite.Options{}).Close()
	target := filepath.Join(dir, "mnt", "backups", "hookdedup.db")
	link := filepath.Join(dir, "backup.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.BackupFile(ctx, live, link)
	if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), target) ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Errorf("backup to a dangling link: %v; want a refusal naming the link and its missing target", err)
	}
	if got, err := os.Readlink(link); err != nil || got != target {
		t.Errorf("the link after the refused backup: %q, %v; want it as it was, to %s", got, err, target)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the link's target after the refused backup: %v; want nothing made there", err)
	}
}

// A backup's FILE that is a symbolic link to an earlier backup is written through: the
// link stays, and the file it leads to holds the new copy.
func TestBackup_WritesThroughALink(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	db := storagetest.OpenPath(t, live, sqlite.Options{})
	db.Close()
	if err := os.MkdirAll(filepath.Join(dir, "nas"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "nas", "hookdedup-backup.db")
	if _, err := sqlite.BackupFile(ctx, live, target); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "latest.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.BackupFile(ctx, live, link); err != nil {
		t.Fatalf("backup through a link to an earlier backup: %v", err)
	}
	if got, err := os.Readlink(link); err != nil || got != target {
		t.Errorf("the link after the backup: %q, %v; want it as it was, to %s", got, err, target)
	}
	after, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Errorf("the link's target is the earlier backup's file; want the new copy there")
	}
	if after.Mode().Perm() != 0o600 {
		t.Errorf("the new copy's mode is %v; want 0600", after.Mode().Perm())
	}
}
