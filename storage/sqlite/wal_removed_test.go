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
	stored := 0
	for i := range 3 {
		storagetest.Record(t, db, delivery("ota", fmt.Sprint("before_", i), "h"), day)
		stored++
	}
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	var refused error
	for i := 0; i < 100 && refused == nil; i++ {
		refused = db.Record(ctx, delivery("ota", fmt.Sprint("after_", i), "h"), day)
		if refused == nil {
			stored++
			time.Sleep(50 * time.Millisecond)
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
	after := storagetest.OpenPath(t, path, sqlite.Options{MustExist: true})
	if c, err := storagetest.CountDeliveries(ctx, after, ""); err != nil || int(c.Accepted) != stored {
		t.Errorf("after a clean close the database holds %+v (%v), want the %d deliveries stored", c, err, stored)
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
