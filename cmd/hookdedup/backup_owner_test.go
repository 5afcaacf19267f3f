package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestBackup_RootIntoTheServiceDirectory: an operator takes a backup before an upgrade
// with sudo, into the directory README's backup timer uses, which is not there yet. The
// directory and the backup made there must be the service's user's, whose directory
// they are in: made root's (0700), the timer, running as that user, could no longer
// write a backup there ("open backups/: permission denied"), nor read and prune the
// backup root left.
func TestBackup_RootIntoTheServiceDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as a backup run with sudo")
	}
	const uid, gid = 65534, 65534 // nobody: any user but root
	home := filepath.Join(t.TempDir(), "lib")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(home, "hookdedup.db")
	db, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, dbPath} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	backups := filepath.Join(home, "backups")
	if out, err := runCmd(t, "", "backup", "--database", dbPath, backups+"/"); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	named := filepath.Join(home, "named", "before-upgrade.db")
	if out, err := runCmd(t, "", "backup", "--database", dbPath, named); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	made, err := filepath.Glob(filepath.Join(backups, "hookdedup-*.db"))
	if err != nil || len(made) != 1 {
		t.Fatalf("backups made: %v (%v), want one", made, err)
	}
	for _, p := range []string{backups, made[0], filepath.Dir(named), named} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("%s is owned by %d:%d after a backup run as root, want %d:%d, the service's user", p, st.Uid, st.Gid, uid, gid)
		}
	}
}
