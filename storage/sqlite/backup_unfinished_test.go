package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestBackup_DiskFull: a backup onto a full disk says that the backup's disk is full,
// not SQLite's "database or disk is full" alone, which reads as the database backed up,
// and leaves nothing there; once there is room, it is taken.
func TestBackup_DiskFull(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", mnt).Run(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 2<<20) // twice the disk
	err = db.Record(ctx, &storage.Delivery{Source: "ota", Key: "k1", KeyMethod: storage.MethodEventID, PayloadHash: "h", Body: body},
		storage.ClaimOptions{TTL: time.Hour})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(mnt, "b.db")
	_, err = sqlite.BackupFile(ctx, path, dest)
	if err == nil || !strings.Contains(err.Error(), "(the backup's disk is full: free space on it, or back up to another disk, and run backup again)") {
		t.Fatalf("backup onto a full disk: %v, want it to say that the backup's disk is full", err)
	}
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Errorf("%d files left on the full disk, want none", len(entries))
	}
	if _, err := sqlite.BackupFile(ctx, path, filepath.Join(t.TempDir(), "b.db")); err != nil {
		t.Errorf("backup where there is room: %v", err)
	}
}

// TestBackup_Interrupted: a backup interrupted while it copies (Ctrl-C) says so, and
// not that the copy "does not check", which reads as a damaged database; it leaves
// nothing at the destination.
func TestBackup_Interrupted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 4<<20)
	for i := range 25 { // 100 MiB: a copy that takes a while
		if err := db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: fmt.Sprint("k", i), KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: body}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	dest := filepath.Join(dir, "b.db")
	_, err = sqlite.BackupFile(ctx, path, dest)
	if err == nil || !strings.Contains(err.Error(), "interrupted before it was done") || strings.Contains(err.Error(), "does not check") {
		t.Fatalf("backup interrupted: %v, want it said to be interrupted", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "b.db") {
			t.Errorf("%s left after the interrupted backup", e.Name())
		}
	}
}

// TestRestore_Interrupted: a restore interrupted while it checks the backup (Ctrl-C)
// says so, and not that the backup "does not check", which reads as a damaged backup;
// the database it would replace is left as it was.
func TestRestore_Interrupted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 4<<20)
	for i := range 25 { // 100 MiB: a check that takes a while
		if err := db.Record(context.Background(), &storage.Delivery{Source: "ota", Key: fmt.Sprint("k", i), KeyMethod: storage.MethodEventID,
			PayloadHash: "h", Body: body}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "b.db")
	if _, err := sqlite.BackupFile(context.Background(), path, backup); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(dir, "restored.db")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = sqlite.RestoreCopy(ctx, backup, into)
	if err == nil || !strings.Contains(err.Error(), "interrupted before it was done") || strings.Contains(err.Error(), "does not check") {
		t.Fatalf("restore interrupted: %v, want it said to be interrupted", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "restored.db") {
			t.Errorf("%s left after the interrupted restore", e.Name())
		}
	}
}
