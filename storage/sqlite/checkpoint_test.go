package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_Checkpointer checks that committed deliveries reach the database file soon
// after their commit, while the database stays open, though the writer itself would
// only checkpoint once the WAL reached 64 MiB.
func TestDB_Checkpointer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
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

	storagetest.Eventually(t, 10*time.Second, func() error {
		if size := fileSize(t, path); size < before+800_000 {
			return fmt.Errorf("database file %d bytes after 400 deliveries of 2 KB (%d before): they stayed in the WAL", size, before)
		}
		return nil
	})
}

// TestDB_WALStartsOver checks that under writes that never pause the checkpointer
// catches up and the writer finishes the job, so the WAL starts over without waiting
// for the writer's own backstop checkpoint (which held intake 30-50 ms at scale), and
// that the checkpointer fsyncs the file only before handing the writer that job.
func TestDB_WALStartsOver(t *testing.T) {
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "restart.db"), sqlite.Options{})
	writeUntilRestarts(t, db, 2)
	// The checkpointer only started its passes' pages on their way to the disk, and
	// fsynced the file once before each final pass it handed to the writer: an fsync
	// after every pass also flushes the disk's cache, which commits waited for.
	passes, fsyncs, _ := db.CheckpointerStats()
	if fsyncs == 0 || fsyncs >= passes {
		t.Errorf("the checkpointer fsynced the file %d times in %d passes: want once before each final pass, not after every pass", fsyncs, passes)
	}
}

// TestDB_WALStartsOverWithoutSyncFileRange checks that where the checkpointer cannot
// start its passes' writes (a kernel without sync_file_range, a sandbox that forbids
// it) it fsyncs them instead, and still sees to it that the WAL starts over.
func TestDB_WALStartsOverWithoutSyncFileRange(t *testing.T) {
	sqlite.SetStartWriteBack(t, func(int) error { return syscall.EPERM })
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "restart.db"), sqlite.Options{})
	writeUntilRestarts(t, db, 1)
	if _, _, fallbacks := db.CheckpointerStats(); fallbacks == 0 {
		t.Error("no pass of the checkpointer fsynced instead: the failing sync_file_range was not used")
	}
}

// TestDB_CheckpointFailuresLogged checks that failing checkpoints are logged, once
// while they go on (each pass fails alike, twenty times a second), and that their end is
// logged too: the WAL grows meanwhile, and the log says why.
func TestDB_CheckpointFailuresLogged(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	sqlite.SetStartWriteBack(t, func(int) error {
		if failing.Load() {
			return syscall.EIO
		}
		return nil
	})
	sqlite.SetFdatasyncFile(t, func(fd int) error {
		if failing.Load() {
			return syscall.EIO
		}
		return syscall.Fdatasync(fd)
	})
	var log logBuffer
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "cp.db"),
		sqlite.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})

	record := func(from, to int) {
		for i := from; i < to; i++ {
			if err := db.Record(context.Background(), delivery("ota", fmt.Sprintf("evt_%d", i), "h"), storage.ClaimOptions{TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const failed = "a checkpoint failed"
	i := 0
	storagetest.Eventually(t, 10*time.Second, func() error {
		record(i, i+10)
		i += 10
		if strings.Count(log.String(), failed) == 0 {
			return errors.New("no failed checkpoint logged yet")
		}
		return nil
	})
	// Further passes fail alike without a line each.
	passes, _, _ := db.CheckpointerStats()
	storagetest.Eventually(t, 10*time.Second, func() error {
		record(i, i+10)
		i += 10
		if p, _, _ := db.CheckpointerStats(); p < passes+3 {
			return fmt.Errorf("%d passes since the first failure logged, want 3", p-passes)
		}
		return nil
	})
	text := log.String()
	if n := strings.Count(text, failed); n != 1 {
		t.Errorf("%d lines of failed checkpoints within a minute, want 1:\n%s", n, text)
	}
	if !strings.Contains(text, "input/output error") || !strings.Contains(text, "level=ERROR") {
		t.Errorf("the line does not give the error at level ERROR:\n%s", text)
	}

	failing.Store(false)
	storagetest.Eventually(t, 10*time.Second, func() error {
		record(i, i+10)
		i += 10
		if !strings.Contains(log.String(), "checkpoints copy the write-ahead log into the database file again") {
			return errors.New("the checkpoints' recovery not logged yet")
		}
		return nil
	})
}

// logBuffer is a log's text, written by the database's goroutines and read by the test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeUntilRestarts records deliveries from 16 goroutines without a pause until the
// writer has finished restarts checkpoints that the checkpointer caught up (so that the
// WAL started over), then checks that every delivery recorded is in the database.
func writeUntilRestarts(t *testing.T, db *sqlite.DB, restarts int64) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopWriters) // before the database closes, also when the test fails early
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
	storagetest.Eventually(t, 30*time.Second, func() error {
		if n := db.WALRestarts(); n < restarts && !t.Failed() {
			return fmt.Errorf("the writer finished %d checkpoints under continuous writes, want at least %d", n, restarts)
		}
		return nil
	})
	stopWriters()
	// Nothing was lost on the way: every committed delivery is in the database.
	n := 0
	sent.Range(func(k, _ any) bool {
		n++
		if ds, err := db.KeyDeliveries(context.Background(), "ota", k.(string)); err != nil || len(ds) != 1 {
			t.Fatalf("key %s: %d deliveries, %v", k, len(ds), err)
		}
		return true
	})
	passes, fsyncs, fallbacks := db.CheckpointerStats()
	t.Logf("%d deliveries, %d restarts, %d passes, %d fsyncs, %d passes fsynced instead", n, db.WALRestarts(), passes, fsyncs, fallbacks)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
