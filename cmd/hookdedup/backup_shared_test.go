package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestBackup_WarnsOfASharedDatabase: README warns of a database that other users can read
// at every open, and the daily backup timer is often the one command whose log an
// operator reads. A backup of such a database (one an earlier version made 0644) says so
// on stderr, as serve and the other commands do, and leaves its mode as it is; the
// backup itself is 0600 whatever the database's mode.
func TestBackup_WarnsOfASharedDatabase(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "copy.db")
	if out, err := runCmd(t, "", "backup", "--database", dbPath, copyPath); err != nil || strings.Contains(out, "other users") {
		t.Fatalf("backup of a private database: %v\n%s", err, out)
	}
	if err := os.Chmod(dbPath, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "", "backup", "--database", dbPath, copyPath)
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if strings.Count(out, "can be read by other users") != 1 || !strings.Contains(out, dbPath+" (0644)") || !strings.Contains(out, "chmod 600") {
		t.Errorf("backup of a database other users can read: want one warning naming %s (0644) and chmod 600, got:\n%s", dbPath, out)
	}
	for path, want := range map[string]os.FileMode{dbPath: 0o644, copyPath: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %#o", path, fi.Mode().Perm(), err, want)
		}
	}
}
