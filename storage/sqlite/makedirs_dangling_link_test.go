package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestMakeDirs_DanglingLink: a directory given through a symbolic link whose target is
// missing (the backups' directory linked to a disk that is not mounted) is refused,
// naming the link and its target, rather than taken for a directory made meanwhile,
// after which the first file written there failed as "no such file or directory",
// naming that file (a backup's temporary copy).
func TestMakeDirs_DanglingLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "mnt", "backups")
	link := filepath.Join(dir, "backups")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{link, link + "/", filepath.Join(link, "daily")} {
		err := sqlite.MakeDirs(d)
		if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), target) ||
			!strings.Contains(err.Error(), "does not exist") {
			t.Errorf("MakeDirs(%s), %s a link to the missing %s: %v; want it refused, naming both", d, link, target, err)
		}
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("the link's target after MakeDirs: %v, want it still missing", err)
	}
	// A link to a directory that is there is a directory.
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := sqlite.MakeDirs(filepath.Join(link, "daily")); err != nil {
		t.Errorf("MakeDirs under a link to a directory: %v", err)
	}
}
