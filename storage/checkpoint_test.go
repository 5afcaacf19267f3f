package storage_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestDB_Checkpointer checks that committed deliveries reach the database file soon
// after their commit, while the database stays open, though the writer itself would
// only checkpoint once the WAL reached 64 MiB.
func TestDB_Checkpointer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.db")
	db := MustOpenPath(t, path)
	before := fileSize(t, path)

	var wg sync.WaitGroup
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := delivery("ota", fmt.Sprintf("evt_%d", i), "h")
			d.Body = make([]byte, 2000) // ~1 MiB in all: far below the writer's own threshold
			if err := db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for fileSize(t, path) < before+800_000 {
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes after 400 deliveries of 2 KB (%d before): they stayed in the WAL",
				fileSize(t, path), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDB_WALStartsOver checks that under writes that never pause the checkpointer
// catches up and the writer finishes the job, so the WAL starts over without waiting
// for the writer's own backstop checkpoint (which held intake 30-50 ms at scale).
func TestDB_WALStartsOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "restart.db")
	db := MustOpenPath(t, path)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent sync.Map
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("evt_%d_%d", g, i)
				d := delivery("ota", key, "h")
				d.Body = make([]byte, 2000)
				if err := db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
					t.Error(err)
					return
				}
				sent.Store(key, true)
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for db.WALRestarts() < 2 && time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if n := db.WALRestarts(); n < 2 {
		t.Fatalf("the writer finished %d checkpoints in 30 s of continuous writes, want at least 2", n)
	}
	// Nothing was lost on the way: every committed delivery is in the database.
	n := 0
	sent.Range(func(k, _ any) bool {
		n++
		if ds, err := db.KeyDeliveries(context.Background(), "ota", k.(string)); err != nil || len(ds) != 1 {
			t.Fatalf("key %s: %d deliveries, %v", k, len(ds), err)
		}
		return true
	})
	t.Logf("%d deliveries, %d restarts", n, db.WALRestarts())
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
