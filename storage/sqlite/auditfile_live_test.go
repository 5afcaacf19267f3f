package sqlite_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestAuditFile_LiveInUnwritableDirectory: a live database in a directory the reader
// cannot write (serve running as another user; made immutable here) is read through its
// -shm as usual, never as the file alone: rows serve commits are seen.
func TestAuditFile_LiveInUnwritableDirectory(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "live")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	// serve starts.
	db, err = sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatalf("live database has no -wal: %v", err)
	}
	t.Logf("-wal of the live database: %d bytes", fi.Size())
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })

	af, err := sqlite.OpenAuditFile(ctx, path, time.Second)
	if err != nil {
		t.Fatalf("open audit file: %v", err)
	}
	defer af.Close()
	before := countAudit(t, af)
	// serve commits (it can: its -wal and -shm are open already).
	for i := range 50 {
		if err := db.AppendAudit(ctx, storage.AuditEntry{At: time.Now(), Actor: "alice", Action: "release",
			Source: "ota", Key: "evt_" + string(rune('a'+i%26)), Reason: "a release while serve runs"}); err != nil {
			t.Fatal(err)
		}
	}
	want := before + 50
	time.Sleep(200 * time.Millisecond) // serve's checkpointer
	if got := countAudit(t, af); got != want {
		t.Errorf("audit rows read from the live database after serve committed 50: %d, want %d (it was opened immutable: the file alone, no WAL, no locks)", got, want)
	}
	if c, err := af.VerifyAudit(ctx, storage.AuditAnchor{}); err != nil {
		t.Errorf("verify the live database: %v", err)
	} else {
		t.Logf("verify: %+v", c)
	}
}

func countAudit(t *testing.T, af *sqlite.AuditFile) int {
	t.Helper()
	n := 0
	if err := af.AuditRows(context.Background(), func(storage.AuditEntry) error { n++; return nil }); err != nil {
		t.Fatalf("audit rows: %v", err)
	}
	return n
}
