package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestUserAdd_RootMakesTheServiceDatabase: the first admin added with sudo, before the
// service's first start, into the service's directory (README's StateDirectory, its
// user's). The database it makes there must be that user's: root's, 0600, the service
// could not open it ("unable to open database file: permission denied"), and systemd
// gives the service's user only the directory, not what root made in it.
func TestUserAdd_RootMakesTheServiceDatabase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as a command run with sudo")
	}
	const uid, gid = 65534, 65534 // nobody: any user but root
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, uid, gid); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(state, "hookdedup.db")
	if out, err := runCmd(t, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", dbPath); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	fi, err := os.Stat(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
		t.Errorf("%s is owned by %d:%d after user add run as root, want %d:%d, the owner of its directory", dbPath, st.Uid, st.Gid, uid, gid)
	}
}
