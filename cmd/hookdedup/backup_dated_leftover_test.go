package main

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestBackup_DatedFileRemovesKilledCopies: a backup to a dated file
// (backups/hookdedup-$(date +%F).db, as the README's example names it) killed before
// its rename leaves its copy under that day's name, .hookdedup-<day>.db.<n>.tmp, as
// large as the database. The next day's backup, to another name, removes it and the
// journal beside it, and leaves alone a copy written in the last minute (another
// backup's, running) and a file of that form that is no database.
func TestBackup_DatedFileRemovesKilledCopies(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateUser(context.Background(), storage.User{Name: "ana", Role: storage.RoleViewer, PasswordHash: "x"}, "test"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	backups := filepath.Join(dir, "backups")
	first := filepath.Join(backups, "hookdedup-2026-12-05.db")
	if out, code := cli(t, dir, nil, "", "backup", first); code != 0 {
		t.Fatalf("backup %s: %d %s", first, code, out)
	}
	whole, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte, age time.Duration) string {
		t.Helper()
		p := filepath.Join(backups, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// What the backup of 2026-12-06, killed halfway through its copy, left.
	left := write(".hookdedup-2026-12-06.db.4242.tmp", whole[:len(whole)/2], 24*time.Hour)
	journal := write(".hookdedup-2026-12-06.db.4242.tmp-journal", whole[:512], 24*time.Hour)
	running := write(".hookdedup-2026-12-07.db.5151.tmp", whole[:len(whole)/2], 0)
	notes := write(".notes.txt.99.tmp", []byte("keep me"), 24*time.Hour)
	// Another program's database under a name of the same shape, whole: not hookdedup's.
	photos := filepath.Join(backups, ".photos.db.17.tmp")
	other, err := sql.Open("sqlite3", photos)
	if err == nil {
		_, err = other.Exec(`CREATE TABLE albums (name TEXT)`)
		err = errors.Join(err, other.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(photos, time.Now().Add(-24*time.Hour), time.Now().Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}

	next := filepath.Join(backups, "hookdedup-2026-12-07.db")
	if out, code := cli(t, dir, nil, "", "backup", next); code != 0 {
		t.Fatalf("backup %s: %d %s", next, code, out)
	}
	for _, p := range []string{left, journal} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s, left by a killed backup a day ago, is still there", filepath.Base(p))
		}
	}
	for _, p := range []string{running, notes, photos, first} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
	b, err := sqlite.Open(next, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n, err := b.CountUsers(context.Background()); err != nil || n != 1 {
		t.Errorf("the new backup holds %d users (%v), want 1", n, err)
	}
}
