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
