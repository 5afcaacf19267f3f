package sqlite_test

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestBuild_SQLiteSyncsWithFdatasync checks that what make builds (`make test`, the CI's
// command, and so `make build` and `make release`) compiles SQLite with HAVE_FDATASYNC,
// so that a commit syncs with fdatasync rather than fsync. Only CGO_CFLAGS reaches
// go-sqlite3's C code, and the Makefile sets it; a `go test` run by hand is built with
// the caller's flags, so there it checks nothing. Nor does it where the Makefile adds
// no flag (anywhere but Linux), or where the build information cannot say (-trimpath,
// from GOFLAGS, leaves the C flags out of it).
func TestBuild_SQLiteSyncsWithFdatasync(t *testing.T) {
	if os.Getenv("MAKELEVEL") == "" {
		t.Skip("not run by make: the C flags are the caller's")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the Makefile sets HAVE_FDATASYNC on Linux only")
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("the test binary carries no build information")
	}
	for _, s := range info.Settings {
		if s.Key == "-trimpath" && s.Value == "true" {
			t.Skip("built with -trimpath, whose build information leaves out the C flags")
		}
	}
	for _, s := range info.Settings {
		if s.Key == "CGO_CFLAGS" {
			if !slices.Contains(strings.Fields(s.Value), "-DHAVE_FDATASYNC=1") {
				t.Fatalf("CGO_CFLAGS=%q: SQLite is built without -DHAVE_FDATASYNC=1 (the Makefile sets it)", s.Value)
			}
			return
		}
	}
	t.Fatal("the build information names no CGO_CFLAGS: was cgo off?")
}

// TestBuild_SQLiteMapsTheWholeFile checks that what make builds lets SQLite map a
// database file of any size (SQLITE_MAX_MMAP_SIZE, from the Makefile): a database
// asks for DefaultMmapSize, and SQLite silently maps less when built to allow less.
func TestBuild_SQLiteMapsTheWholeFile(t *testing.T) {
	if os.Getenv("MAKELEVEL") == "" {
		t.Skip("not run by make: the C flags are the caller's")
	}
	if strconv.IntSize < 64 {
		t.Skip("the Makefile sets SQLITE_MAX_MMAP_SIZE on 64-bit platforms only")
	}
	db := storagetest.Open(t)
	_, read, _, write, err := db.PageSettings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if read != sqlite.DefaultMmapSize || write != sqlite.DefaultMmapSize {
		t.Fatalf("mmap_size %d (readers) and %d (writer), want %d: SQLite is built without -DSQLITE_MAX_MMAP_SIZE=0x10000000000 (the Makefile sets it)",
			read, write, sqlite.DefaultMmapSize)
	}
}
