package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_ReplacedFileKeepsNotItsWAL: once the database file is replaced while open (a
// backup moved over it), hookdedup answers 503 and says to restart. It must not leave
// the replaced database's WAL at the path: SQLite does not checkpoint or remove the WAL
// of a file that has moved when it closes, and the next open would replay that WAL,
// written for another file, into the one now at the path, and serve it malformed.
func TestDB_ReplacedFileKeepsNotItsWAL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")
	db, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		storagetest.Record(t, db, delivery("ota", fmt.Sprintf("before-%d", i), "h"), day)
	}
	if _, err := db.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	// Enough after the backup that the live file's pages no longer match the backup's.
	body := strings.Repeat("x", 2000)
	for i := range 1500 {
		d := delivery("ota", fmt.Sprintf("after-%d", i), "h")
		d.Body = []byte(`{"pad":"` + body + `"}`)
		storagetest.Record(t, db, d, day)
	}
	if err := os.Rename(backup, live); err != nil {
		t.Fatal(err)
	}
	if err := db.Record(ctx, delivery("ota", "noticed", "h"), day); !errors.Is(err, storage.ErrFileGone) {
		t.Fatalf("a delivery after the file was replaced: %v, want ErrFileGone", err)
	}
	if err := db.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	aside, _ := filepath.Glob(live + "-wal.orphaned-*")
	if len(aside) != 1 {
		t.Errorf("the replaced database's WAL set aside as %q, want one file", aside)
	}

	// Restarted, as the log and /readyz say to.
	again, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatalf("reopen after the restart: %v", err)
	}
	defer again.Close()
	if err := again.IntegrityCheck(ctx); err != nil {
		t.Fatalf("the file at the path after a restart: %v", err)
	}
	if _, err := again.Claim(ctx, "ota", "before-0"); err != nil {
		t.Fatalf("the backup's keys after the restart: %v", err)
	}
}

// TestDB_WritesRefusedOnceFileGone: once the database file has left its path, intake
// and readiness answer 503, and so must every other write (a release from the console,
// the API or the CLI, the dispatcher's, the sweeps', a sign-in's): it would commit into
// the removed file, which nobody will open again, and report success. The file is
// looked for before each write and after its commit.
func TestDB_WritesRefusedOnceFileGone(t *testing.T) {
	ctx := context.Background()
	live := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, live, sqlite.Options{})
	storagetest.Record(t, db, delivery("ota", "evt_1", "h"), day)
	storagetest.Record(t, db, delivery("ota", "evt_2", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	jobs, err := db.LeaseDue(ctx, db.Now(), time.Minute, 10, nil)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v %v", jobs, err)
	}
	u, err := db.CreateUser(ctx, storage.User{Name: "ana", Role: storage.RoleOperator, PasswordHash: "x"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	if err := db.Record(ctx, delivery("ota", "evt_3", "h"), day); !errors.Is(err, storage.ErrFileGone) {
		t.Fatalf("a delivery after the file was removed: %v, want ErrFileGone", err)
	}
	now := db.Now()
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"release", func() error {
			_, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "ana", Reason: "PMS restored"})
			return err
		}},
		{"bulk release", func() error {
			_, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "evt_1"}}, storage.Release{Actor: "ana", Reason: "r"})
			return err
		}},
		{"lease", func() error { _, err := db.LeaseDue(ctx, now.Add(time.Hour), time.Minute, 10, nil); return err }},
		{"finish attempt", func() error {
			_, err := db.FinishAttempt(ctx, jobs[0], storage.Attempt{StartedAt: now}, storage.AttemptResult{Done: true})
			return err
		}},
		{"audit", func() error { return db.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "test"}) }},
		{"add user", func() error {
			_, err := db.CreateUser(ctx, storage.User{Name: "bo", Role: storage.RoleViewer, PasswordHash: "x"}, "ana")
			return err
		}},
		{"set password", func() error { return db.SetUserPassword(ctx, "ana", "y", "ana") }},
		{"sign in", func() error { _, err := db.CreateSession(ctx, u, now); return err }},
		{"login throttle", func() error {
			_, err := db.LoginAttempt(ctx, now, map[string]storage.Throttle{"addr:192.0.2.1": {}})
			return err
		}},
		{"sweep claims", func() error { _, err := db.SweepExpired(ctx, now, 10); return err }},
		{"rejection counts", func() error {
			return db.AddRejectionCounts(ctx, []storage.RejectionCount{{Source: "x", Status: 404, Minute: now, Rejections: 1}})
		}},
		{"end session", func() error { return db.EndSession(ctx, "sid") }},
	} {
		if err := w.write(); !errors.Is(err, storage.ErrFileGone) {
			t.Errorf("%s after the file was removed: %v, want ErrFileGone", w.name, err)
		}
	}
}
