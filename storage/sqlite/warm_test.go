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
	const keys = 100_000
	fillKeys(t, path, keys)
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

// TestOpen_ReadsTheKeyIndexAheadOnTheWriter: the read ahead of the claims' key index
// runs on the write connection, whose memory map the writes use (each connection maps
// the file on its own, and a page of a map is a fault the first time it is touched):
// while the writer is held, it makes no progress, and it ends once the writer is free.
func TestOpen_ReadsTheKeyIndexAheadOnTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	const keys = 20_000
	fillKeys(t, path, keys)
	sqlite.SetBigFile(t, 1, 1024)
	sqlite.SetWarmChunk(t, 2) // a read of two entries: thousands of reads, still going when held
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	release, err := db.HoldWriter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { release() }()
	// The read that had the connection as the hold asked for it is counted once it has
	// given the connection back: counted from a moment later.
	time.Sleep(50 * time.Millisecond)
	held := db.WarmReads()
	select {
	case <-db.WarmDone():
		t.Fatalf("the read ahead ended after %d reads before the writer was held; want it longer", held)
	case <-time.After(300 * time.Millisecond):
	}
	if got := db.WarmReads(); got != held {
		t.Fatalf("the read ahead went on from %d to %d reads while the writer was held: it reads on another connection", held, got)
	}
	release()
	release = func() {}
	select {
	case <-db.WarmDone():
	case <-time.After(time.Minute):
		t.Fatal("the read ahead did not end within a minute of the writer's release")
	}
	if got := db.WarmReads(); got < keys/2 {
		t.Errorf("the read ahead made %d reads, want the %d of the whole index two entries at a time", got, keys/2)
	}
}

// fillKeys makes a database at path holding keys claimed keys, each with its delivery,
// spread over the key space as providers' ids are.
func fillKeys(t *testing.T, path string, keys int) {
	t.Helper()
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
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
}
