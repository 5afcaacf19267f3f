package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestBackupRestore takes a backup with `hookdedup backup` while serve takes traffic,
// restores it with `hookdedup restore` (refused while serve runs) and finds in it every
// delivery answered before the backup began; the restored keys still deduplicate.
func TestBackupRestore(t *testing.T) {
	t.Parallel() // its own serve processes, files and ports
	dir := t.TempDir()
	cfg := fmt.Sprintf("[[source]]\nname = \"ota\"\nsignature = \"standard-webhooks\"\nsecret = %q\n", testSecret)
	if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	v := standardWebhooks(t, testSecret)
	s := startLogged(t, dir, "serve.log", nil)
	client := &http.Client{Timeout: time.Minute}
	send := func(url, id string) (int, map[string]string, error) {
		req, err := signedRequest(v, url, "ota", id, fmt.Appendf(nil, `{"booking_id":%q,"status":"cancelled"}`, id))
		if err != nil {
			return 0, nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var a map[string]string
		json.NewDecoder(resp.Body).Decode(&a)
		return resp.StatusCode, a, nil
	}

	// Traffic throughout the backup.
	type ack struct {
		id, delivery string
		at           time.Time
	}
	var mu sync.Mutex
	var acks []ack
	acked := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	var stop atomic.Bool
	var wg sync.WaitGroup
	stopTraffic := sync.OnceFunc(func() { stop.Store(true); wg.Wait() })
	t.Cleanup(stopTraffic) // before serve is killed, also when the test fails early
	for w := range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load() && i < 20000; i++ {
				id := fmt.Sprintf("evt_%d_%d", w, i)
				code, a, err := send(s.url, id)
				if err != nil || code != 200 {
					t.Errorf("%s: %d %v %v", id, code, a, err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{id, a["delivery"], time.Now()})
				mu.Unlock()
			}
		})
	}
	storagetest.Eventually(t, time.Minute, func() error {
		if n := acked(); n < 300 && !t.Failed() {
			return fmt.Errorf("%d deliveries answered, want 300 before the backup", n)
		}
		return nil
	})
	backupStarted := time.Now()
	backup := filepath.Join(dir, "backup.db")
	out, code := cli(t, dir, nil, "", "backup", backup)
	// And traffic after it.
	afterBackup := acked()
	storagetest.Eventually(t, time.Minute, func() error {
		if n := acked(); n < afterBackup+10 && !t.Failed() {
			return fmt.Errorf("%d deliveries answered after the backup, want 10", n-afterBackup)
		}
		return nil
	})
	stopTraffic()
	if code != 0 || !strings.Contains(out, "backed up hookdedup.db to "+backup) {
		t.Fatalf("backup: %d %s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "backup"); code == 0 || !strings.Contains(out, "usage: hookdedup backup FILE") {
		t.Fatalf("backup without FILE: %d %s", code, out)
	}

	// Refused while serve has the database open; nothing is touched.
	if out, code := cli(t, dir, nil, "", "restore", backup); code != 1 || !strings.Contains(out, "stop serve") {
		t.Fatalf("restore while serve runs: %d %s", code, out)
	}
	s.stop(t)
	if out, code := cli(t, dir, nil, "", "restore", backup); code != 0 || !strings.Contains(out, "restored hookdedup.db from") || !strings.Contains(out, "kept as hookdedup.db.before-restore-") {
		t.Fatalf("restore: %d %s", code, out)
	}

	db, err := sqlite.Open(filepath.Join(dir, "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, after := 0, 0
	mu.Lock()
	for _, a := range acks {
		id, _ := strconv.ParseInt(a.delivery, 10, 64)
		d, err := db.Delivery(ctx, id)
		if a.at.Before(backupStarted) {
			before++
			if err != nil || d.Key != a.id || d.Outcome != storage.Accepted {
				t.Errorf("delivery %s (%s), answered before the backup began: %+v %v", a.delivery, a.id, d, err)
			}
		} else if err == nil {
			after++
		}
	}
	mu.Unlock()
	db.Close()
	t.Logf("backup holds all %d deliveries answered before it began (and %d answered during it)", before, after)

	// The restored database serves: a key from before the backup is still held.
	s = startLogged(t, dir, "serve-restored.log", nil)
	mu.Lock()
	first := acks[0]
	mu.Unlock()
	code, a, err := send(s.url, first.id)
	if err != nil || code != 200 || a["status"] != "duplicate" || a["first_delivery"] != first.delivery {
		t.Fatalf("redelivery of %s after restore: %d %v %v, want a duplicate of %s", first.id, code, a, err, first.delivery)
	}
	s.stop(t)
	checkLogs(t, dir)
}

// TestBackup_KeepClockWasAhead: a backup named for a time after the one just written
// (taken while the clock was ahead) neither counts toward --keep nor is removed, and
// the backup just written stays: pruned by name alone, it would be removed first, and
// every daily backup after it until the clock caught up.
func TestBackup_KeepClockWasAhead(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	backups := filepath.Join(dir, "backups")
	if out, err := runCmd(t, "", "backup", "--database", dbPath, backups+"/"); err != nil {
		t.Fatalf("first backup: %v\n%s", err, out)
	}
	entries, _ := os.ReadDir(backups)
	if len(entries) != 1 {
		t.Fatalf("backups: %v", entries)
	}
	// The clock was a year ahead when that one was taken.
	future := filepath.Join(backups, "hookdedup-20991231T000000Z.db")
	if err := os.Rename(filepath.Join(backups, entries[0].Name()), future); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "", "backup", "--database", dbPath, "--keep", "1", backups+"/")
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	var written string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "backed up "+dbPath+" to "); ok {
			written, _, _ = strings.Cut(rest, ":")
		}
	}
	if _, err := os.Stat(written); err != nil {
		t.Errorf("the backup just written (%s) is gone: %v\n%s", written, err, out)
	}
	if _, err := os.Stat(future); err != nil || !strings.Contains(out, "kept "+future+", named for a time after this backup's") {
		t.Errorf("the backup named for a later time: %v\n%s", err, out)
	}
	// An older backup still counts, and goes.
	older := filepath.Join(backups, "hookdedup-20000101T000000Z.db")
	if err := os.Rename(written, older); err != nil {
		t.Fatal(err)
	}
	if out, err = runCmd(t, "", "backup", "--database", dbPath, "--keep", "1", backups+"/"); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if !strings.Contains(out, "removed old backup "+older) {
		t.Errorf("want %s removed:\n%s", older, out)
	}
	if entries, _ := os.ReadDir(backups); len(entries) != 2 {
		t.Errorf("backups left: %v, want the later-named one and the one just written", entries)
	}
}

// TestRestore_IntoNewDirectory: a restore on a new machine, into a database path whose
// directory is not made yet, makes it as serve does (0700).
func TestRestore_IntoNewDirectory(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "old.db")
	db, err := sqlite.Open(src, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	backup := filepath.Join(dir, "backup.db")
	if out, err := runCmd(t, "", "backup", "--database", src, backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	target := filepath.Join(dir, "var", "lib", "hookdedup", "hookdedup.db")
	out, err := runCmd(t, "", "restore", "--database", target, backup)
	if err != nil {
		t.Errorf("restore into a directory not made yet: %v\n%s", err, out)
		if strings.Contains(err.Error(), ".tmp") {
			t.Errorf("the error names a temporary file, not the missing directory: %v", err)
		}
		return
	}
	if fi, err := os.Stat(filepath.Dir(target)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory made for the restored database: %v %v, want 0700", fi.Mode(), err)
	}
}

// TestBackup_RefusesLaterDatabase: a backup of an older copy over a database that holds
// more (the live one, stopped, named by an operator who meant restore) is refused, and
// that database keeps what it holds.
func TestBackup_RefusesLaterDatabase(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	if out, err := runCmd(t, "first-admin-password\n", "user", "add", "alice", "--role", "admin", "--database", live); err != nil {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	old := filepath.Join(dir, "backup-yesterday.db")
	if out, err := runCmd(t, "", "backup", "--database", live, old); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	// A delivery taken in since.
	db, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storagetest.Record(t, db, &storage.Delivery{Source: "ota", Key: "evt_after", Body: []byte(`{}`), PayloadHash: "h", ReceivedAt: time.Now()},
		storage.ClaimOptions{TTL: time.Hour})
	db.Close()
	out, err := runCmd(t, "", "backup", "--database", old, live)
	if err == nil || !strings.Contains(err.Error(), "it holds more than") {
		t.Errorf("backup of an older copy over the newer live database: %v\n%s", err, out)
	}
	check, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := check.Claim(context.Background(), "ota", "evt_after"); err != nil {
		t.Errorf("the live database lost the delivery taken in after the old backup: %v", err)
	}
	check.Close()
	// Restored from the old copy, the database goes on with its ids: the old copy is an
	// earlier copy of it still, and a backup over it passes.
	if out, err := runCmd(t, "", "restore", "--database", live, old); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if out, err := runCmd(t, "", "backup", "--database", live, old); err != nil {
		t.Errorf("backup over the copy the database was restored from: %v\n%s", err, out)
	}
}

// TestRestore_UndoAfterCrash: restoring the database that a restore kept aside undoes
// the restore, also when that database was left by a crash with commits in its WAL,
// which the undo copies with it and folds in.
func TestRestore_UndoAfterCrash(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live", "hookdedup.db")
	db, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	backup := filepath.Join(dir, "backup.db")
	if out, err := runCmd(t, "", "backup", "--database", live, backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	// A commit after the backup, still in the WAL when the process dies: copy the files
	// while the connection is open, as a crash leaves them.
	raw := commitLeftInWAL(t, live, `UPDATE delivery_seq SET last = last + 100`)
	defer raw.Close()
	crashed := filepath.Join(dir, "crashed")
	if err := os.Mkdir(crashed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "-wal"} {
		b, err := os.ReadFile(live + s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashed, "hookdedup.db"+s), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dbPath := filepath.Join(crashed, "hookdedup.db")
	out, err := runCmd(t, "", "restore", "--database", dbPath, backup)
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	_, previous, ok := strings.Cut(out, "the database it replaced is kept as ")
	if !ok {
		t.Fatalf("restore names no kept database:\n%s", out)
	}
	previous = strings.TrimSpace(previous)
	if out, err := runCmd(t, "", "restore", "--database", dbPath, previous); err != nil {
		t.Fatalf("undoing the restore: %v\n%s", err, out)
	}
	// What the crashed database's WAL held is back.
	check, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var last, was int64
	if err := check.QueryRow(`SELECT last FROM delivery_seq`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT last FROM delivery_seq`).Scan(&was); err != nil {
		t.Fatal(err)
	}
	if last < was {
		t.Errorf("after the undo the sequence is at %d, the crashed database's at %d: its WAL was not folded in", last, was)
	}
}

// TestRestore_StaleWALBesideThePathRefused: a crashed database moved aside without its
// -wal leaves commits in that WAL at the path. restore refuses to put the backup beside
// it, naming it, and puts nothing there: at its first open the restored file would have
// the other database's commits replayed into it (or be corrupted by them). Once the WAL
// has gone along with its database, the restore goes ahead and holds the backup only.
func TestRestore_StaleWALBesideThePathRefused(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	db, err := sqlite.Open(live, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")
	if out, err := runCmd(t, "", "backup", "--database", live, backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	// A commit after the backup, still in the WAL when the process dies: the WAL is
	// copied while the connection is open, as a crash leaves it.
	wal := walAsACrashLeavesIt(t, live, `INSERT INTO settings (name, value) VALUES ('written_after_backup', 'x')`)
	moved := filepath.Join(dir, "moved-aside.db")
	if err := os.Rename(live, moved); err != nil {
		t.Fatal(err)
	}
	os.Remove(live + "-shm")
	writeFile(t, live+"-wal", wal)

	for _, args := range [][]string{
		{"restore", "--database", live, backup},
		{"restore", "--copy", "--database", live, backup},
	} {
		out, err := runCmd(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), "hookdedup.db-wal holds transactions of a database that is no longer there") {
			t.Fatalf("%v beside a WAL that holds commits: %v\n%s\nwant a refusal naming hookdedup.db-wal", args, err, out)
		}
		if _, err := os.Stat(live); !os.IsNotExist(err) {
			t.Fatalf("%v was refused, yet put a file at the path (%v)", args, err)
		}
	}

	if err := os.Rename(live+"-wal", moved+"-wal"); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, "", "restore", "--database", live, backup); err != nil {
		t.Fatalf("restore once the WAL went along with its database: %v\n%s", err, out)
	}
	check, err := sql.Open("sqlite3", "file:"+live+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var n int
	if err := check.QueryRow(`SELECT count(*) FROM settings WHERE name = 'written_after_backup'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the restored database holds a row written after the backup")
	}
}

// commitLeftInWAL commits qs to the SQLite file at path on a connection of its own that
// never checkpoints, and returns that connection, open: until it closes, the commits
// are in the -wal only, as a process killed at that moment leaves them.
func commitLeftInWAL(t *testing.T, path string, qs ...string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	for _, q := range append([]string{`PRAGMA wal_autocheckpoint = 0`}, qs...) {
		if _, err := raw.Exec(q); err != nil {
			raw.Close()
			t.Fatal(err)
		}
	}
	return raw
}

// walAsACrashLeavesIt commits qs to the SQLite file at path and returns its -wal as a
// process killed before a checkpoint leaves it, holding those commits.
func walAsACrashLeavesIt(t *testing.T, path string, qs ...string) []byte {
	t.Helper()
	raw := commitLeftInWAL(t, path, qs...)
	defer raw.Close()
	wal, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return wal
}

// TestBackup_NewerSchema: a database that a newer version migrated is backed up as it
// is, whole and sound, for that version to restore, with a warning that this version
// cannot; this version's restore refuses the copy, and its other commands but the audit
// log's the database, as the README says.
func TestBackup_NewerSchema(t *testing.T) {
	dir := t.TempDir()
	dbPath, copyPath := filepath.Join(dir, "hookdedup.db"), filepath.Join(dir, "copy.db")
	db, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("sqlite3", "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	_, err = raw.Exec(`INSERT INTO migrations (name, applied_at) VALUES ('migrations/9999_future.sql', 1)`)
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}

	out, err := runCmd(t, "", "backup", "--database", dbPath, copyPath)
	if err != nil {
		t.Fatalf("backup of a newer database: %v\n%s", err, out)
	}
	const warning = "warning: a newer hookdedup migrated " // then the file
	if !strings.Contains(out, warning) || !strings.Contains(out, "(migrations 9999_future.sql): only that version or a later one can restore "+copyPath+", not this one") {
		t.Errorf("backup of a newer database says nothing of who can restore it:\n%s", out)
	}
	if out, err := runCmd(t, "", "restore", "--copy", "--database", filepath.Join(dir, "r.db"), copyPath); err == nil || !strings.Contains(err.Error(), "the backup is of a newer schema") {
		t.Errorf("restore of the newer copy: %v\n%s; want it refused", err, out)
	}
	if out, err := runCmd(t, "", "audit", "verify", "--database", dbPath); err != nil {
		t.Errorf("audit verify of a newer database: %v\n%s; want it read as it is", err, out)
	}
	if _, err := runCmd(t, "", "keys", "--database", dbPath); err == nil || !strings.Contains(err.Error(), "schema is newer") {
		t.Errorf("keys on a newer database: %v; want it refused", err)
	}
	// A backup of a database this version knows warns of nothing.
	known := filepath.Join(dir, "known.db")
	if db, err = sqlite.Open(known, sqlite.Options{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if out, err := runCmd(t, "", "backup", "--database", known, filepath.Join(dir, "known-copy.db")); err != nil || strings.Contains(out, "warning") {
		t.Errorf("backup of a database this version knows: %v\n%s", err, out)
	}
}
