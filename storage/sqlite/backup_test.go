package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestBackup_WhileWriting takes a backup while writers commit as fast as they can: the
// copy holds every delivery committed before it began, and is one consistent snapshot
// (every claim's first delivery is in it, every duplicate's first delivery too).
func TestBackup_WhileWriting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := storagetest.OpenPath(t, filepath.Join(dir, "hookdedup.db"), sqlite.Options{})
	for i := range 200 {
		storagetest.Record(t, db, delivery("ota", fmt.Sprintf("pre_%d", i), "h"), day)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var written atomic.Int64
	defer wg.Wait()
	defer stop.Store(true) // first: the writers stop, then they are waited for
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load() && i < 100000; i++ {
				// Every key twice: accepted, then duplicate.
				key := fmt.Sprintf("w%d_%d", w, i/2)
				if err := db.Record(ctx, delivery("ota", key, "h"), day); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		})
	}
	storagetest.Eventually(t, time.Minute, func() error {
		if n := written.Load(); n < 500 && !t.Failed() {
			return fmt.Errorf("the writers stalled at %d deliveries, want 500 before the backup", n)
		}
		return nil
	})
	before, err := storagetest.CountDeliveries(ctx, db, "")
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backups", "copy.db")
	os.Mkdir(filepath.Dir(backup), 0o700)
	info, err := db.Backup(ctx, backup)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != backup || info.Bytes == 0 || info.Deliveries < before.Accepted+before.Duplicate {
		t.Fatalf("backup info %+v; %d deliveries were committed before it began", info, before.Accepted+before.Duplicate)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "backups", ".*")); len(tmp) > 0 {
		t.Errorf("temporary files left behind: %v", tmp)
	}
	if st, _ := os.Stat(backup); st.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600: it holds secrets and password hashes", st.Mode().Perm())
	}

	copyDB := storagetest.OpenPath(t, backup, sqlite.Options{})
	got, err := storagetest.CountDeliveries(ctx, copyDB, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Accepted+got.Duplicate != info.Deliveries {
		t.Fatalf("copy holds %+v, backup said %d", got, info.Deliveries)
	}
	keys, err := copyDB.ListKeys(ctx, storage.KeyFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(keys)) != got.Accepted || int64(len(keys)) != info.Claims {
		t.Fatalf("copy holds %d claims and %d accepted deliveries (info %+v)", len(keys), got.Accepted, info)
	}
	for _, c := range keys {
		all, err := copyDB.KeyDeliveries(ctx, c.Source, c.Key)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) == 0 || all[0].ID != c.FirstDelivery || all[0].Outcome != storage.Accepted {
			t.Fatalf("claim %s points at %d, deliveries %+v", c.Key, c.FirstDelivery, all)
		}
		for _, d := range all[1:] {
			if d.FirstDelivery != c.FirstDelivery {
				t.Fatalf("duplicate %d of %s points at %d, not %d", d.ID, c.Key, d.FirstDelivery, c.FirstDelivery)
			}
		}
	}
	for i := range 200 {
		if _, err := copyDB.Claim(ctx, "ota", fmt.Sprintf("pre_%d", i)); err != nil {
			t.Fatalf("pre_%d: %v", i, err)
		}
	}
}

func TestBackup_RefusesItself(t *testing.T) {
	db := storagetest.Open(t)
	if _, err := db.Backup(context.Background(), db.Path()); err == nil {
		t.Fatal("a backup over the live database itself succeeded")
	}
}

func TestRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")

	db := backedUp(t, live, backup, numberedKeys(50)...)
	// After the backup: written, then lost by the restore (kept aside).
	storagetest.Record(t, db, delivery("ota", "after", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	info, err := sqlite.Restore(ctx, backup, live)
	if err != nil {
		t.Fatal(err)
	}
	if info.Deliveries != 50 || info.Previous == "" {
		t.Fatalf("restore info %+v", info)
	}
	restored := storagetest.OpenPath(t, live, sqlite.Options{})
	if c, _ := storagetest.CountDeliveries(ctx, restored, ""); c.Accepted != 50 {
		t.Fatalf("restored database holds %+v, want the 50 of the backup", c)
	}
	if _, err := restored.Claim(ctx, "ota", "after"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a key claimed after the backup is in the restored database: %v", err)
	}
	previous := storagetest.OpenPath(t, info.Previous, sqlite.Options{})
	if _, err := previous.Claim(ctx, "ota", "after"); err != nil {
		t.Fatalf("the replaced database, kept aside, lost its last write: %v", err)
	}

	// Into a place with no database yet.
	fresh := filepath.Join(dir, "new", "hookdedup.db")
	os.Mkdir(filepath.Dir(fresh), 0o700)
	if info, err := sqlite.Restore(ctx, backup, fresh); err != nil || info.Previous != "" || info.Deliveries != 50 {
		t.Fatalf("restore to a new place: %+v %v", info, err)
	}

	// Not a database: refused, and nothing moved.
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, []byte("not a database, not at all"), 0o600)
	if _, err := sqlite.Restore(ctx, junk, fresh); err == nil {
		t.Fatal("restored a file that is not a database")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a refused restore moved the database: %v", err)
	}
}

// TestRestore_ContinuesDeliveryIDs: delivery ids "come from a persistent sequence and
// are never reused". A restore from a backup takes the sequence back to the backup's,
// so the ids issued after the backup (already answered to providers, and sent
// downstream in X-Hookdedup-Delivery) would be issued again, to other events: the
// restored database goes on after the highest id the replaced one issued.
func TestRestore_ContinuesDeliveryIDs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")

	db := backedUp(t, live, backup, numberedKeys(5)...)
	after := storagetest.Record(t, db, delivery("ota", "after-backup", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Restore(ctx, backup, live); err != nil {
		t.Fatal(err)
	}
	restored := storagetest.OpenPath(t, live, sqlite.Options{})
	next := storagetest.Record(t, restored, delivery("ota", "after-restore", "h"), day)
	if next.ID <= after.ID {
		t.Fatalf("after the restore a new event got delivery id %d; id %d was issued before the restore to %s/%s: an id issued twice",
			next.ID, after.ID, after.Source, after.Key)
	}
}

// TestRestore_ContinuesIDsOfOldSchema: a database made before ids came from a sequence
// names the highest id it issued wherever a row still does; the roll-up's mark counts
// too, since the delivery it names may have been swept since. A restore over it must not
// issue that id again.
func TestRestore_ContinuesIDsOfOldSchema(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")
	db := backedUp(t, live, backup, numberedKeys(5)...)
	after := storagetest.Record(t, db, delivery("ota", "after-backup", "h"), day)
	if _, err := db.RollupStats(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// As an older version left it: no sequence, and the newest delivery swept with its
	// claim; only the roll-up's mark still names its id.
	raw, err := sql.Open("sqlite3", "file:"+live)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE delivery_seq`, `DELETE FROM attempts`,
		`DELETE FROM claims WHERE first_delivery >= ?`, `DELETE FROM deliveries WHERE id >= ?`} {
		var args []any
		if strings.Contains(q, "?") {
			args = append(args, after.ID)
		}
		if _, err := raw.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	if _, err := sqlite.Restore(ctx, backup, live); err != nil {
		t.Fatal(err)
	}
	restored := storagetest.OpenPath(t, live, sqlite.Options{})
	next := storagetest.Record(t, restored, delivery("ota", "after-restore", "h"), day)
	if next.ID <= after.ID {
		t.Fatalf("after the restore a new event got delivery id %d; id %d was issued before it: an id issued twice", next.ID, after.ID)
	}
}

// TestRestore_RefusedWhileInUse holds the database open in another process, as a
// running serve would: InUse says so and Restore refuses, until that process closes it.
func TestRestore_RefusedWhileInUse(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")
	db := backedUp(t, live, backup, "k")
	db.Close()
	if busy, err := sqlite.InUse(live); err != nil || busy {
		t.Fatalf("InUse of a closed database = %v, %v", busy, err)
	}

	release := holdDatabase(t, live)
	if busy, err := sqlite.InUse(live); err != nil || !busy {
		t.Fatalf("InUse while another process has it open = %v, %v", busy, err)
	}
	if _, err := sqlite.Restore(ctx, backup, live); !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("restore while in use: %v, want ErrInUse", err)
	}
	release()
	if busy, err := sqlite.InUse(live); err != nil || busy {
		t.Fatalf("InUse after the other process closed it = %v, %v", busy, err)
	}
	if _, err := sqlite.Restore(ctx, backup, live); err != nil {
		t.Fatal(err)
	}
}

// holdDatabase opens the database at path in another process (TestHelperHoldDatabase)
// until release is called, which waits for that process to close it and end.
func holdDatabase(t *testing.T, path string) (release func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldDatabase$")
	cmd.Env = append(os.Environ(), "HOOKDEDUP_HOLD_DB="+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "open\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	return func() {
		t.Helper()
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelperHoldDatabase is not a test: TestRestore_RefusedWhileInUse runs it in a
// child process to hold a database open until its stdin closes.
func TestHelperHoldDatabase(t *testing.T) {
	path := os.Getenv("HOOKDEDUP_HOLD_DB")
	if path == "" {
		t.Skip("helper process only")
	}
	if os.Getenv("HOOKDEDUP_HOLD_AS_IS") != "" {
		// As an earlier version's serve would: open, read, and migrate nothing.
		raw, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`SELECT count(*) FROM deliveries`); err != nil {
			t.Fatal(err)
		}
		fmt.Println("open")
		io.Copy(io.Discard, os.Stdin)
		raw.Close()
		return
	}
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storagetest.CountDeliveries(context.Background(), db, ""); err != nil {
		t.Fatal(err)
	}
	fmt.Println("open")
	io.Copy(io.Discard, os.Stdin)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// inUseElsewhere asks another process (TestHelperInUse) whether the database at path is
// in use: this process's own locks are not reported to itself.
func inUseElsewhere(t *testing.T, path string) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperInUse$")
	cmd.Env = append(os.Environ(), "HOOKDEDUP_INUSE_DB="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	switch first {
	case "in use":
		return true
	case "not in use":
		return false
	}
	t.Fatalf("helper: %q", out)
	return false
}

// TestHelperInUse is not a test: inUseElsewhere runs it in a child process.
func TestHelperInUse(t *testing.T) {
	path := os.Getenv("HOOKDEDUP_INUSE_DB")
	if path == "" {
		t.Skip("helper process only")
	}
	busy, err := sqlite.InUse(path)
	if err != nil {
		t.Fatal(err)
	}
	if busy {
		fmt.Println("in use")
	} else {
		fmt.Println("not in use")
	}
}

// TestOpen_UpgradeKeepsItsLocks: a database upgraded as it is opened stays marked as in
// use for other processes while it is open. The look for another process holding it
// comes before this one connects: had it come after, closing its descriptor of the -shm
// would have dropped SQLite's locks, and a backup or a restore in another process would
// have taken the serve's database for unused (truncating the -shm under it, or
// replacing the file).
func TestOpen_UpgradeKeepsItsLocks(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	db := backedUp(t, live, filepath.Join(dir, "first.db"), "k")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, live, `DELETE FROM migrations WHERE name = 'migrations/0026_dispatch_lease.sql'`, `ALTER TABLE claims DROP COLUMN leased_until`)
	db, err := sqlite.Open(live, sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !strings.Contains(fileMigrations(t, live), "0026") {
		t.Fatal("the open did not upgrade the file")
	}
	if !inUseElsewhere(t, live) {
		t.Fatal("the upgraded database, open here, looks unused to another process")
	}
}

// TestOpen_UpgradeRefusedWhileInUse: a database of an earlier schema that another
// process has open (the earlier version's serve, during an upgrade) is not migrated
// under it: Open refuses, naming the migrations it lacks, and leaves the file as it
// was; BackupFile copies it as it is, schema and all. Once that process is gone, Open
// upgrades it.
func TestOpen_UpgradeRefusedWhileInUse(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	db := backedUp(t, live, filepath.Join(dir, "first.db"), "k")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	const last = "migrations/0026_dispatch_lease.sql"
	execFile(t, live, `DELETE FROM migrations WHERE name = '`+last+`'`, `ALTER TABLE claims DROP COLUMN leased_until`)
	before := fileMigrations(t, live)

	t.Setenv("HOOKDEDUP_HOLD_AS_IS", "1")
	release := holdDatabase(t, live)
	_, err := sqlite.Open(live, sqlite.Options{MustExist: true})
	if err == nil || !strings.Contains(err.Error(), "lacks migrations 0026_dispatch_lease.sql") ||
		!strings.Contains(err.Error(), "another process has it open") {
		t.Fatalf("open of an older schema held by another process: %v; want a refusal naming the migration", err)
	}
	if after := fileMigrations(t, live); after != before {
		t.Errorf("migrations after the refusal: %s, before: %s", after, before)
	}
	backup := filepath.Join(dir, "pre-upgrade.db")
	if _, err := sqlite.BackupFile(ctx, live, backup); err != nil {
		t.Fatal(err)
	}
	if got := fileMigrations(t, backup); got != before {
		t.Errorf("the backup records %s; want the schema as it was, %s", got, before)
	}
	if after := fileMigrations(t, live); after != before {
		t.Errorf("migrations after the backup: %s, before: %s", after, before)
	}
	release()
	db, err = sqlite.Open(live, sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatalf("open once the other process is gone: %v", err)
	}
	db.Close()
	if after := fileMigrations(t, live); !strings.Contains(after, last) {
		t.Errorf("migrations once upgraded: %s; want %s among them", after, last)
	}
}

// TestBackup_OnlyOverAnEarlierCopy: a backup replaces nothing but an earlier copy (or
// an empty file): not a file of another kind, a name mistyped onto the configuration,
// nor a database another process has open.
func TestBackup_OnlyOverAnEarlierCopy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	earlier := filepath.Join(dir, "earlier.db")
	db := backedUp(t, live, earlier, "k")
	defer db.Close()
	if _, err := db.Backup(ctx, earlier); err != nil {
		t.Errorf("backup over an earlier copy: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.BackupFile(ctx, live, empty); err != nil {
		t.Errorf("backup over an empty file: %v", err)
	}
	conf := filepath.Join(dir, "hookdedup.toml")
	const text = "database = \"hookdedup.db\"\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	storagetest.OpenPath(t, other, sqlite.Options{}).Close()
	release := holdDatabase(t, other)
	defer release()
	// A file whose WAL still holds its transactions (its process was killed).
	logged := filepath.Join(dir, "logged.db")
	raw := rawDB(t, logged)
	rawExec(t, raw, `PRAGMA journal_mode=WAL`, `PRAGMA wal_autocheckpoint=0`, `CREATE TABLE t (x)`, `INSERT INTO t VALUES (1)`)
	for _, tt := range []struct{ path, want string }{
		{conf, "not a SQLite database"},
		{dir, "is a directory, not a file"},
		{other, "another process has open"},
		{logged, "logged.db-wal holds transactions"},
	} {
		if _, err := sqlite.BackupFile(ctx, live, tt.path); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("backup over %s: %v; want a refusal saying %q", filepath.Base(tt.path), err, tt.want)
		}
	}
	if b, err := os.ReadFile(conf); err != nil || string(b) != text {
		t.Errorf("the configuration after the refused backup: %q…, %v", b[:min(len(b), 40)], err)
	}
}

// TestRestore_BackupThroughSymlink: a backup reached through a link keeps its WAL
// beside the link's target. One whose WAL holds commits (the backup is open, or was
// not closed cleanly) is refused through the link as it is by its own name: restored
// without them, the commits would be lost.
func TestRestore_BackupThroughSymlink(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")
	db := backedUp(t, live, backup, "k")
	db.Close()
	// A commit left in the backup's WAL, as a process killed with it open leaves one.
	raw := rawDB(t, backup)
	if _, err := raw.Exec(`PRAGMA journal_mode=WAL`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`PRAGMA wal_autocheckpoint=0`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO settings (name, value) VALUES ('late', 'x')`); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(backup + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("the backup's WAL: %v, %v; want commits in it", fi, err)
	}
	link := filepath.Join(dir, "latest.db")
	if err := os.Symlink("backup.db", link); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{backup, link} {
		if _, err := sqlite.Restore(ctx, from, live); err == nil || !strings.Contains(err.Error(), "-wal exists") {
			t.Errorf("restore from %s with commits in its WAL: %v; want a refusal naming the -wal", filepath.Base(from), err)
		}
	}
}

// A backup written over one of the files SQLite keeps beside the database would
// replace them under the open connections: the commits in the -wal would live on
// only in a file no path names, and the next process to open the database would take
// the backup for its log.
func TestBackup_RefusesSideFiles(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	storagetest.Record(t, db, delivery("ota", "evt_1", "h"), day)
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		t.Run(suffix, func(t *testing.T) {
			dest := db.Path() + suffix
			before, statErr := os.Stat(dest)
			if _, err := db.Backup(ctx, dest); err == nil {
				t.Fatalf("a backup over the database's %s succeeded", suffix)
			}
			after, err := os.Stat(dest)
			if statErr == nil && (err != nil || !os.SameFile(before, after)) {
				t.Fatalf("the database's %s was replaced", suffix)
			}
		})
	}
	if _, err := db.Claim(ctx, "ota", "evt_1"); err != nil {
		t.Fatalf("the delivery committed before the attempts: %v", err)
	}
}

// A database reached through a symbolic link (its directory moved to a larger disk,
// the old path linked to it) keeps its -wal and -shm beside the link's target, where
// SQLite resolves the name. Restore through the link must see the serve holding it
// open, and once it is closed put the restored file where the link points, with the
// replaced database's WAL moved along beside it.
func TestRestore_ThroughSymlink(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "data", "hookdedup.db")
	link := filepath.Join(dir, "hookdedup.db")
	backup := filepath.Join(dir, "backup.db")
	db := backedUp(t, real, backup, "k")
	db.Close()
	if err := os.Symlink(filepath.Join("data", "hookdedup.db"), link); err != nil {
		t.Fatal(err)
	}

	release := holdDatabase(t, link)
	if busy, err := sqlite.InUse(link); err != nil || !busy {
		t.Errorf("InUse through the link while another process has it open = %v, %v", busy, err)
	}
	if _, err := sqlite.Restore(ctx, backup, link); !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("restore through the link while in use: %v, want ErrInUse", err)
	}
	release()
	if _, err := sqlite.Restore(ctx, backup, link); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a file: %v %v", fi.Mode(), err)
	}
}

// Two restores in one second (a script, or a wrong backup put right at once) name the
// database each replaces alike; the second must not rename its interim database over
// the first one kept aside, which holds what was written after the backup.
func TestRestore_TwiceInOneSecond(t *testing.T) {
	ctx := context.Background()
	live, backup := writtenAfterBackup(t)
	for {
		first, err := sqlite.Restore(ctx, backup, live)
		if err != nil {
			t.Fatal(err)
		}
		second, err := sqlite.Restore(ctx, backup, live)
		if err != nil {
			t.Fatal(err)
		}
		if stamp := len("hookdedup.db.before-restore-20060102T150405Z"); filepath.Base(first.Previous)[:stamp] ==
			filepath.Base(second.Previous)[:stamp] {
			kept := storagetest.OpenPath(t, first.Previous, sqlite.Options{})
			if _, err := kept.Claim(ctx, "ota", "after"); err != nil {
				t.Fatalf("the database the first restore replaced, kept as %s, lost what was written after the backup: %v", first.Previous, err)
			}
			return
		}
		// The second fell in the next second: nothing shown; restore the original and try again.
		if _, err := sqlite.Restore(ctx, first.Previous, live); err != nil {
			t.Fatal(err)
		}
	}
}

// writtenAfterBackup makes a closed database, live, that holds the key ota/after
// claimed after its backup, backup, was taken (which holds the keys given, or
// ota/before).
func writtenAfterBackup(t *testing.T, keys ...string) (live, backup string) {
	t.Helper()
	if len(keys) == 0 {
		keys = []string{"before"}
	}
	dir := t.TempDir()
	live = filepath.Join(dir, "hookdedup.db")
	backup = filepath.Join(dir, "backup.db")
	db := backedUp(t, live, backup, keys...)
	storagetest.Record(t, db, delivery("ota", "after", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return live, backup
}

// backedUp opens a database at path, records a delivery of each of keys, and backs it
// up to backup; the database stays open, for what comes after the backup.
func backedUp(t *testing.T, path, backup string, keys ...string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		storagetest.Record(t, db, delivery("ota", k, "h"), day)
	}
	if _, err := db.Backup(context.Background(), backup); err != nil {
		t.Fatal(err)
	}
	return db
}

// numberedKeys is k0 to k(n-1).
func numberedKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	return keys
}

// A restore is undone by restoring the database it kept aside, which must therefore be
// kept without the empty WAL that reading its delivery ids leaves behind; a WAL that
// holds something still refuses, as it would on any backup, and so does a rollback
// journal that holds something (an empty one is nothing to fold in).
func TestRestore_UndoneByRestoringKeptAside(t *testing.T) {
	ctx := context.Background()
	live, backup := writtenAfterBackup(t)
	restored, err := sqlite.Restore(ctx, backup, live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(restored.Previous + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the database kept aside has a WAL beside it: %v", err)
	}
	if _, err := sqlite.Restore(ctx, restored.Previous, live); err != nil {
		t.Fatalf("undo the restore: %v", err)
	}
	undone := storagetest.OpenPath(t, live, sqlite.Options{})
	if _, err := undone.Claim(ctx, "ota", "after"); err != nil {
		t.Fatalf("the key claimed after the backup, once the restore is undone: %v", err)
	}
	undone.Close()

	// An empty rollback journal beside the backup holds nothing to fold in; one that
	// holds something is refused, as a WAL that does.
	if err := os.WriteFile(backup+"-journal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Restore(ctx, backup, live); err != nil {
		t.Fatalf("restore from a backup beside an empty journal: %v", err)
	}
	for _, suffix := range []string{"-journal", "-wal"} {
		if err := os.WriteFile(backup+suffix, []byte("a transaction not folded in"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := sqlite.Restore(ctx, backup, live); err == nil || !strings.Contains(err.Error(), suffix+" exists") {
			t.Fatalf("restore from a backup whose %s holds something: %v, want a refusal", suffix, err)
		}
		os.Remove(backup + suffix)
	}
}

// TestSnapshot_LeftCopyRemoved: migrate reads a file of an earlier schema through an
// upgraded copy beside it, as large as the database. A migrate killed while it reads
// (SIGKILL, the OOM killer) cannot remove its copy; the next migrate, backup or restore
// beside it does. A copy that another process is still reading is left alone.
func TestSnapshot_LeftCopyRemoved(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	db := storagetest.OpenPath(t, live, sqlite.Options{})
	storagetest.Record(t, db, delivery("ota", "k1", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite3", "file:"+live)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM migrations WHERE name = 'migrations/0027_attempts_swept.sql'`, `DROP INDEX attempts_delivery`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	copies := func() []string {
		t.Helper()
		names, err := filepath.Glob(filepath.Join(dir, ".hookdedup.db.*.tmp"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	child := exec.Command(os.Args[0], "-test.run=^TestHelperSnapshot$")
	child.Env = append(os.Environ(), "HOOKDEDUP_SNAPSHOT_DB="+live)
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "open\n" {
		t.Fatalf("helper: %q", line)
	}
	held := copies()
	if len(held) != 1 {
		t.Fatalf("copies beside the file while another process reads it: %v, want its one", held)
	}

	// Another migrate meanwhile reads through a copy of its own, and leaves the other's.
	snap, err := sqlite.OpenSnapshot(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if got := copies(); len(got) != 1 || got[0] != held[0] {
		t.Fatalf("copies after a snapshot beside one another process reads: %v, want %v left alone", got, held)
	}

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	if got := copies(); len(got) != 1 {
		t.Fatalf("copies after the reader was killed: %v, want its copy still there", got)
	}
	// A copy written in the last minute may be one another process has only just made.
	snap, err = sqlite.OpenSnapshot(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if got := copies(); len(got) != 1 {
		t.Fatalf("copies after a snapshot just after the reader was killed: %v, want its copy left for a minute", got)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(held[0], old, old); err != nil {
		t.Fatal(err)
	}
	snap, err = sqlite.OpenSnapshot(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if got := copies(); len(got) != 0 {
		t.Fatalf("copies after the next snapshot: %v, want the killed reader's removed", got)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(held[0] + suffix); err == nil {
			t.Errorf("the killed reader's copy was removed but not its %s", suffix)
		}
	}
}

// TestHelperSnapshot is not a test: TestSnapshot_LeftCopyRemoved runs it in a child
// process to read a database through OpenSnapshot until it is killed.
func TestHelperSnapshot(t *testing.T) {
	path := os.Getenv("HOOKDEDUP_SNAPSHOT_DB")
	if path == "" {
		t.Skip("helper process only")
	}
	snap, err := sqlite.OpenSnapshot(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("open")
	io.Copy(io.Discard, os.Stdin)
	snap.Close()
}

// TestRemoveLeftCopies_OnlyOurs: what looks like a left copy is removed only if it is
// one: named as tempBeside names them, unlocked, unwritten for a minute, and open as a
// database in no process (an earlier version's copies took no lock).
func TestRemoveLeftCopies_OnlyOurs(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "hookdedup.db")
	old := time.Now().Add(-2 * time.Minute)
	file := func(name string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("a copy"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}
	left := file(".hookdedup.db.123456.tmp")
	fresh := filepath.Join(dir, ".hookdedup.db.654321.tmp")
	if err := os.WriteFile(fresh, []byte("just made"), 0o600); err != nil {
		t.Fatal(err)
	}
	named := file(".hookdedup.db.staging.tmp")
	other := file(".other.db.123.tmp")
	open := filepath.Join(dir, ".hookdedup.db.777.tmp")
	db := storagetest.OpenPath(t, open, sqlite.Options{})
	storagetest.Record(t, db, delivery("ota", "k", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	release := holdDatabase(t, open)
	if err := os.Chtimes(open, old, old); err != nil {
		t.Fatal(err)
	}

	sqlite.RemoveLeftCopies(live)
	if _, err := os.Stat(left); err == nil {
		t.Errorf("%s, unlocked and old, is still there", left)
	}
	for _, p := range []string{fresh, named, other, open} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	release()
}
