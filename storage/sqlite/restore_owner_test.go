package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestRestore_RootKeepsTheServiceOwner: README's service runs serve as its own user,
// and a restore run with sudo (as root) replaces that user's database. The restored
// file must be that user's, as the database it replaces was: root's, 0600, the service
// could not open it and would not start again ("unable to open database file:
// permission denied"). On a new machine, with no database yet, it takes the owner of
// the directory it goes in, which the service's setup made for it.
func TestRestore_RootKeepsTheServiceOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as a restore run with sudo")
	}
	const uid, gid = 65534, 65534 // nobody: any user but root
	ctx := context.Background()
	dir := t.TempDir()
	live, backup := filepath.Join(dir, "hookdedup.db"), filepath.Join(dir, "nightly.db")
	db := backedUp(t, live, backup, numberedKeys(3)...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(live, uid, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Restore(ctx, backup, live); err != nil {
		t.Fatal(err)
	}
	wantOwner(t, live, uid, gid)

	fresh := filepath.Join(dir, "new")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(fresh, uid, gid); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(fresh, "hookdedup.db")
	if _, err := sqlite.Restore(ctx, backup, restored); err != nil {
		t.Fatal(err)
	}
	wantOwner(t, restored, uid, gid)
}

func wantOwner(t *testing.T, path string, uid, gid uint32) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uid || st.Gid != gid {
		t.Errorf("%s is owned by %d:%d after a restore run as root, want %d:%d, the service's user", path, st.Uid, st.Gid, uid, gid)
	}
}
