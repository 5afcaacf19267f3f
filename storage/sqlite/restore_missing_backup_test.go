package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestRestore_BackupNotThere: a restore on a new machine, whose database directory is
// not made yet, of a backup name mistyped, says that the backup is not there, rather
// than naming the copy it could not make beside the database ("open
// …/.hookdedup.db.123.tmp: no such file or directory"), which would send the operator
// after the database's directory.
func TestRestore_BackupNotThere(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nightly.db")
	for _, live := range []string{
		filepath.Join(dir, "var", "hookdedup.db"), // its directory not made yet
		filepath.Join(dir, "hookdedup.db"),
	} {
		_, err := sqlite.Restore(context.Background(), missing, live)
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing+": no such file") || strings.Contains(err.Error(), ".tmp") {
			t.Errorf("restore %s of a backup that is not there: %v, want it to name the backup as not there", live, err)
		}
		if _, err := os.Stat(live); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("restore of a backup that is not there left %s: %v", live, err)
		}
	}
}

// TestRestore_EmptyBackup: an empty file is named as empty, not as a database without
// hookdedup's tables, and the database restore would replace is left as it is.
func TestRestore_EmptyBackup(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "nightly.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Restore(context.Background(), empty, live)
	if err == nil || !strings.Contains(err.Error(), empty+" is empty (0 bytes)") {
		t.Errorf("restore of an empty file: %v, want it named as empty", err)
	}
	if after, err := os.ReadFile(live); err != nil || string(after) != string(before) {
		t.Errorf("restore of an empty file changed the database: %v", err)
	}
}

// TestRestore_BackupLinkToNothing: a backup named through a symbolic link whose target
// is not there (the backups' disk not mounted) is refused naming the link and where it
// leads, as backup names one; "no such file" of a name that ls lists sent the operator
// looking for a typo.
func TestRestore_BackupLinkToNothing(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "mnt", "nightly.db")
	link := filepath.Join(dir, "nightly.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "hookdedup.db")
	_, err := sqlite.Restore(context.Background(), link, live)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), link+" is a symbolic link to "+target+", which does not exist") {
		t.Errorf("restore from a link to nothing: %v, want it to name the link and its missing target", err)
	}
	if _, err := os.Stat(live); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("restore from a link to nothing left %s: %v", live, err)
	}
}
