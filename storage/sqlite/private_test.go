package sqlite_test

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

func mustMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %#o, want %#o", path, got, want)
	}
}

// The database's files and the directories Open makes for it are private to the user
// that runs hookdedup, whatever the umask leaves (the command's tests run it under
// umask 000; this one under the test's own, usually 022).
func TestOpen_Private(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "hookdedup", "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	if _, err := db.SettingOrInit(t.Context(), "x", func() (string, error) { return "y", nil }); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		mustMode(t, name, 0o600)
	}
	mustMode(t, filepath.Join(dir, "state"), 0o700)
	mustMode(t, filepath.Join(dir, "state", "hookdedup"), 0o700)
}

func TestOpen_MustExist(t *testing.T) {
	t.Run("Missing", func(t *testing.T) {
		dir := t.TempDir()
		for _, path := range []string{
			filepath.Join(dir, "hookdedup.db"),
			filepath.Join(dir, "no", "such", "dir", "hookdedup.db"),
		} {
			db, err := sqlite.Open(path, sqlite.Options{MustExist: true})
			if !errors.Is(err, storage.ErrNoDatabase) {
				if db != nil {
					db.Close()
				}
				t.Fatalf("Open(%s, MustExist) = %v, want ErrNoDatabase", path, err)
			}
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("Open with MustExist left %v in the directory", ents)
		}
	})
	t.Run("Exists", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "hookdedup.db")
		db, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.SettingOrInit(t.Context(), "x", func() (string, error) { return "y", nil }); err != nil {
			t.Fatal(err)
		}
		db.Close()
		db, err = sqlite.Open(path, sqlite.Options{MustExist: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if v, err := db.Setting(t.Context(), "x"); err != nil || v != "y" {
			t.Fatalf("Setting(x) = %q, %v: not the database that was there", v, err)
		}
	})
}

// A database that others can read is reported, once per open, and left as it is.
func TestOpen_WarnsWhenShared(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	open := func() string {
		var buf bytes.Buffer
		db, err := sqlite.Open(path, sqlite.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		return buf.String()
	}
	if log := open(); strings.Contains(log, "other users") {
		t.Fatalf("a private database was reported:\n%s", log)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	log := open()
	if n := strings.Count(log, "level=WARN"); n != 1 || !strings.Contains(log, "chmod 600") ||
		!strings.Contains(log, path+" (0644)") {
		t.Fatalf("want one warning naming %s (0644) and chmod 600, got:\n%s", path, log)
	}
	mustMode(t, path, 0o644)
}
