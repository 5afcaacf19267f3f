package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// A database file past the size from which Open reads the claims' key index ahead of
// deliveries: Open reads the whole index, through system calls with the memory map off,
// before the first delivery asks for a page of it. A file under that size is not read,
// nor one opened with NoReadAhead (by a command, for a moment).
func TestOpen_ReadsTheKeyIndexOfALargeFileAhead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const keys = 100_000
	err = storagetest.BulkLoad(context.Background(), db, storagetest.Fill{
		Source:    "ota",
		Keys:      keys,
		ClaimedAt: time.Now().Add(-time.Hour),
		TTL:       24 * time.Hour,
		Key:       func(i int) string { return fmt.Sprintf("msg_%032x", uint64(i)*0x9e3779b97f4a7c15) },
		Headers:   `{}`,
		Body:      func(i int) []byte { return []byte(`{}`) },
	}, nil)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	// Each index entry holds its key's 36 bytes at least.
	const indexBytes = keys * 36
	read := func(big int64, opt sqlite.Options) int64 {
		sqlite.SetBigFile(t, big, 1024)
		before := storagetest.ProcessIO("self").Read
		opt.MmapSize = -1
		db := storagetest.OpenPath(t, path, opt)
		select {
		case <-db.WarmDone():
		case <-time.After(time.Minute):
			t.Fatal("the read of the key index did not end within a minute")
		}
		return storagetest.ProcessIO("self").Read - before
	}
	if got := read(fi.Size()-1, sqlite.Options{}); got < indexBytes {
		t.Errorf("a file past the size: Open read %d bytes, want the key index's %d at least", got, indexBytes)
	}
	if got := read(fi.Size(), sqlite.Options{}); got >= indexBytes {
		t.Errorf("a file under the size: Open read %d bytes, as much as the key index's %d", got, indexBytes)
	}
	if got := read(fi.Size()-1, sqlite.Options{NoReadAhead: true}); got >= indexBytes {
		t.Errorf("a file past the size, opened for a command: Open read %d bytes, as much as the key index's %d", got, indexBytes)
	}
}
