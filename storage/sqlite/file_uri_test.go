package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestOpen_FileNamedMemory: a relative path ":memory:" is the file of that name, as any
// other path is a file, never SQLite's in-memory database: what is stored in it is there
// at the next open, and every connection sees the schema.
func TestOpen_FileNamedMemory(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx := context.Background()
	db, err := sqlite.Open(":memory:", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateUser(ctx, storage.User{Name: "admin", Role: storage.RoleAdmin, PasswordHash: "h"}, "cli:root"); err != nil {
		t.Fatal(err)
	}
	if n, err := db.CountUsers(ctx); err != nil || n != 1 {
		t.Errorf("users read back: %d, %v; want 1", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(":memory:"); err != nil || fi.Size() == 0 {
		t.Fatalf("file :memory: after a user was stored in it: %v, %v; want the database", fi, err)
	}
	db, err = sqlite.Open(":memory:", sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.CountUsers(ctx); err != nil || n != 1 {
		t.Errorf("users after a reopen: %d, %v; want the 1 stored", n, err)
	}
}

// TestOpen_PathWithDoubleSlash: a path that begins with // ("$DIR/hookdedup.db" with DIR
// set to /) names the file it does for the system, not a URI authority, which SQLite
// refused ("invalid uri authority") after an empty file was made.
func TestOpen_PathWithDoubleSlash(t *testing.T) {
	path := "/" + filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Errorf("%s: %v, %v; want the database", path, fi, err)
	}
}
