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

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
