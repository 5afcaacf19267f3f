package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_WriteWaitBounded holds the write lock from another connection, as another
// process would, while several writers of this one (releases, the dispatcher, a sweep,
// the audit log) wait on the one write connection at once. Each must be told
// ErrWriteTimeout within the busy timeout (and a second) of its call: queued behind the
// others' busy waits, it waited several busy timeouts end to end. Once the lock is let
// go, writes commit again.
func TestDB_WriteWaitBounded(t *testing.T) {
	const busy = 300 * time.Millisecond
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for i := range 4 {
		storagetest.Record(t, db, delivery("ota", fmt.Sprintf("evt_%d", i), "h"), day)
	}

	other, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=100")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	writes := []struct {
		name  string
		write func() error
	}{
		{"lease", func() error { _, err := db.LeaseDue(ctx, db.Now(), time.Minute, 10, nil); return err }},
		{"sweep", func() error { _, err := db.SweepExpired(ctx, db.Now(), 1000); return err }},
		{"audit", func() error { return db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "test"}) }},
	}
	for i := range 4 {
		writes = append(writes, struct {
			name  string
			write func() error
		}{fmt.Sprintf("release %d", i), func() error {
			_, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: fmt.Sprintf("evt_%d", i), Actor: "ana", Reason: "r"})
			return err
		}})
	}
	var wg sync.WaitGroup
	for _, w := range writes {
		wg.Go(func() {
			start := time.Now()
			err := w.write()
			took := time.Since(start)
			if !errors.Is(err, storage.ErrWriteTimeout) {
				t.Errorf("%s under the lock: %v, want ErrWriteTimeout", w.name, err)
			}
			if took > busy+time.Second {
				t.Errorf("%s under the lock returned after %s; the busy timeout is %s, the bound %s",
					w.name, took.Round(time.Millisecond), busy, busy+time.Second)
			}
		})
	}
	wg.Wait()

	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if r, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_0", Actor: "ana", Reason: "r"}); err != nil || !r.Changed {
		t.Fatalf("a release after the lock was let go: %+v %v", r, err)
	}
}
