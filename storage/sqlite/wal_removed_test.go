package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_WALRemovedWhileOpen: the database's -wal is removed while it is open (a
// cleaner of stray files, an operator who took it for one). Its connections go on
// writing to the removed file, which a crash takes with it before the checkpointer has
// copied the commits it alone holds, and another process opening the database starts a
// log of its own there: deliveries would be answered 200 and lost. Writes are refused
// as for a database file that left its path, within seconds; a clean close still folds
// every commit into the database file.
func TestDB_WALRemovedWhileOpen(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd")
	}
	ctx := context.Background()
	path := t.TempDir() + "/hookdedup.db"
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stored []string // the keys of the deliveries answered stored
	for i := range 3 {
		key := fmt.Sprint("before_", i)
		storagetest.Record(t, db, delivery("ota", key, "h"), day)
		stored = append(stored, key)
	}
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	var refused error
	var refusedKey string
	for i := 0; i < 100 && refused == nil; i++ {
		key := fmt.Sprint("after_", i)
		refused = db.Record(ctx, delivery("ota", key, "h"), day)
		if refused == nil {
			stored = append(stored, key)
			time.Sleep(50 * time.Millisecond)
		} else {
			refusedKey = key
		}
	}
	if !errors.Is(refused, storage.ErrFileGone) || !strings.Contains(refused.Error(), "-wal") {
		t.Fatalf("deliveries after the -wal was removed: %v; want them refused (ErrFileGone), naming the -wal", refused)
	}
	if err := db.Ping(ctx); !errors.Is(err, storage.ErrFileGone) {
		t.Errorf("ping after the -wal was removed: %v, want ErrFileGone", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Every delivery answered stored is there. The refused one may be too: the writer
	// finds the -wal gone after the commit that wrote it, and answers an error for a
	// delivery stored (its sender sends it again, a duplicate), never stored for one lost.
	after := storagetest.OpenPath(t, path, sqlite.Options{MustExist: true})
	for _, key := range stored {
		if _, err := after.Claim(ctx, "ota", key); err != nil {
			t.Errorf("after a clean close the delivery of %s, answered stored, is missing: %v", key, err)
		}
	}
	c, err := storagetest.CountDeliveries(ctx, after, "")
	want := len(stored)
	if _, cerr := after.Claim(ctx, "ota", refusedKey); cerr == nil {
		want++
	}
	if err != nil || int(c.Accepted) != want {
		t.Errorf("after a clean close the database holds %+v (%v), want the %d deliveries stored", c, err, want)
	}
}

// TestDB_SHMRemovedWhileOpen: as TestDB_WALRemovedWhileOpen, for the -shm, the index of
// the log whose locks keep two processes from writing at once: a process opening the
// database after it was removed makes one of its own, and writes beside this one.
func TestDB_SHMRemovedWhileOpen(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd")
	}
	ctx := context.Background()
	path := t.TempDir() + "/hookdedup.db"
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	storagetest.Record(t, db, delivery("ota", "before", "h"), day)
	if err := os.Remove(path + "-shm"); err != nil {
		t.Fatal(err)
	}
	var refused error
	for i := 0; i < 100 && refused == nil; i++ {
		if refused = db.Record(ctx, delivery("ota", fmt.Sprint("after_", i), "h"), day); refused == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !errors.Is(refused, storage.ErrFileGone) || !strings.Contains(refused.Error(), "-shm") {
		t.Fatalf("deliveries after the -shm was removed: %v; want them refused (ErrFileGone), naming the -shm", refused)
	}
}
