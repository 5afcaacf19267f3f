package main

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestBackup_RefusesAnotherDatabase: a backup writes over nothing but an earlier copy
// of its own database. A mistyped destination that is another application's SQLite
// database, or another hookdedup database (a second instance's, stopped, which issued
// no more delivery ids), is refused, named, and keeps what it holds; an earlier copy is
// still written over.
func TestBackup_RefusesAnotherDatabase(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", "alice", "--role", "admin", "--database", "a.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}

	// Another application's SQLite database.
	other := filepath.Join(dir, "grafana.db")
	db, err := sql.Open("sqlite3", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE dashboards(id INTEGER PRIMARY KEY, title TEXT); INSERT INTO dashboards(title) VALUES ('prod')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	out, code := cli(t, dir, nil, "", "backup", "--database", "a.db", "grafana.db")
	db, err = sql.Open("sqlite3", other)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	lost := db.QueryRow(`SELECT count(*) FROM dashboards`).Scan(&n) != nil
	db.Close()
	if code == 0 || lost || !strings.Contains(out, "backup to grafana.db: it is a SQLite database that hookdedup did not make") {
		t.Errorf("backup over another application's SQLite database: exit %d, its table lost=%v, want a refusal naming it:\n%s", code, lost, out)
	}

	// Another hookdedup instance's database (a second property), stopped.
	if out, code := cli(t, dir, nil, "another-long-password\n", "user", "add", "bob", "--role", "admin", "--database", "b.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	out, code = cli(t, dir, nil, "", "backup", "--database", "a.db", "b.db")
	list, _ := cli(t, dir, nil, "", "user", "list", "--database", "b.db")
	if code == 0 || !strings.Contains(list, "bob") || !strings.Contains(out, "backup to b.db: it is another hookdedup database") {
		t.Errorf("backup over another instance's database: exit %d, want a refusal naming it; b.db's users now:\n%s\nbackup said:\n%s", code, list, out)
	}

	// An earlier copy of a.db is written over, also after a restore from it.
	for _, step := range [][]string{
		{"backup", "--database", "a.db", "copy.db"},
		{"backup", "--database", "a.db", "copy.db"},
		{"restore", "--database", "a.db", "copy.db"},
		{"backup", "--database", "a.db", "copy.db"},
	} {
		if out, code := cli(t, dir, nil, "", step...); code != 0 {
			t.Errorf("%s: exit %d\n%s", strings.Join(step, " "), code, out)
		}
	}
}

// TestBackup_KeepPrunesOnlyItsDatabase: backups into a directory are named after the
// database they copy, and --keep counts and removes only its own database's: two
// instances whose daily timers share a directory keep each their own backups, also
// when their databases have one file name (in two directories), where the identity
// tells them apart. Two backups within one second each get a file of their own.
func TestBackup_KeepPrunesOnlyItsDatabase(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []struct{ name, db string }{
		{"alice", "a.db"}, {"bob", "b.db"}, {"carol", "one/hookdedup.db"}, {"dave", "two/hookdedup.db"},
	} {
		if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", u.name, "--role", "admin", "--database", u.db); code != 0 {
			t.Fatalf("user add: %d\n%s", code, out)
		}
	}
	backup := func(db string) string {
		t.Helper()
		out, code := cli(t, dir, nil, "", "backup", "--database", db, "--keep", "1", "bk/")
		if code != 0 {
			t.Fatalf("backup %s: %d\n%s", db, code, out)
		}
		return out
	}
	// Each database twice, within one second or not: its second backup removes its
	// first, and nothing of another database.
	var out string
	for _, db := range []string{"a.db", "b.db", "one/hookdedup.db", "two/hookdedup.db"} {
		backup(db)
		out += backup(db)
	}
	holder := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "bk", "*.db"))
	for _, f := range files {
		list, code := cli(t, dir, nil, "", "user", "list", "--database", f)
		if code != 0 {
			t.Fatalf("user list of %s: %d\n%s", f, code, list)
		}
		for _, u := range []string{"alice", "bob", "carol", "dave"} {
			if strings.Contains(list, u) {
				holder[u] = filepath.Base(f)
			}
		}
	}
	if len(files) != 4 || len(holder) != 4 {
		t.Errorf("backups left in bk/: %v, holding the users of %v; want one of each database\n%s", files, holder, out)
	}
	for u, prefix := range map[string]string{"alice": "a-", "bob": "b-", "carol": "hookdedup-", "dave": "hookdedup-"} {
		if !strings.HasPrefix(holder[u], prefix) {
			t.Errorf("%s's backup is %q, want a name beginning %q", u, holder[u], prefix)
		}
	}

	// The name a backup killed before its copy reserved is an empty file: the next
	// backup into the directory removes it.
	left := filepath.Join(dir, "bk", "a-20000101T000000Z.db")
	if err := os.WriteFile(left, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	backup("b.db")
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the empty file a killed backup left (%s): %v, want it removed", left, err)
	}

	// Backups of one database within one second: each a file of its own, numbered on
	// after the highest of the second, so the one just written is the newest by its
	// name, and --keep 2 keeps it and the one before.
	var names []string
	for range 3 {
		o, code := cli(t, dir, nil, "", "backup", "--database", "a.db", "--keep", "2", "same/")
		if code != 0 || strings.Contains(o, "named for a time after") {
			t.Fatalf("backup: %d\n%s", code, o)
		}
		names = append(names, regexp.MustCompile(`to (\S+):`).FindStringSubmatch(o)[1])
	}
	if names[0] == names[1] || names[1] == names[2] {
		t.Errorf("backups within one second written to one name: %v", names)
	}
	for _, n := range names[1:] {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("backup %s: %v %v, want a copy, 0600", n, fi, err)
			continue
		}
		if list, code := cli(t, dir, nil, "", "user", "list", "--database", n); code != 0 || !strings.Contains(list, "alice") {
			t.Errorf("backup %s: user list %d, want alice\n%s", n, code, list)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "same")); len(left) != 2 {
		t.Errorf("same/ holds %v, want the last two backups and nothing beside them", left)
	}
}

// TestBackup_KeepOfADatabaseWithoutIDLeavesOthersBackups: a backup of a database made
// before identities (the new binary backs it up while the old serve runs, and backup
// never migrates) has no identity. Its --keep must leave alone the backups of another
// database of the same file name sharing the directory, which carry an identity.
func TestBackup_KeepOfADatabaseWithoutIDLeavesOthersBackups(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []struct{ name, db string }{{"carol", "one/hookdedup.db"}, {"dave", "two/hookdedup.db"}} {
		if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", u.name, "--role", "admin", "--database", u.db); code != 0 {
			t.Fatalf("user add: %d\n%s", code, out)
		}
	}
	// dave's instance (upgraded, identified) backs up into the shared directory.
	if out, code := cli(t, dir, nil, "", "backup", "--database", "two/hookdedup.db", "--keep", "3", "bk/"); code != 0 {
		t.Fatalf("backup two: %d\n%s", code, out)
	}
	daves, _ := filepath.Glob(filepath.Join(dir, "bk", "*.db"))
	if len(daves) != 1 {
		t.Fatalf("bk/ holds %v", daves)
	}
	// carol's database was made by the version before identities, not reopened since.
	tamper(t, filepath.Join(dir, "one", "hookdedup.db"),
		`DELETE FROM settings WHERE name = 'database_id'`,
		`DELETE FROM migrations WHERE name = 'migrations/0034_database_id.sql'`)
	out, code := cli(t, dir, nil, "", "backup", "--database", "one/hookdedup.db", "--keep", "1", "bk/")
	if code != 0 {
		t.Fatalf("backup one: %d\n%s", code, out)
	}
	if _, err := os.Stat(daves[0]); err != nil {
		t.Errorf("carol's backup --keep 1 removed dave's only backup %s (another database, with an identity of its own): %v\n%s",
			filepath.Base(daves[0]), err, strings.TrimSpace(out))
	}
}

// TestBackup_ConcurrentBackupsKeepTheirOwnFiles: two databases of one file name
// (one/hookdedup.db, two/hookdedup.db) back up into one directory at the same moment,
// again and again. Each reserves its name by an exclusive create; one must never take
// the other's reservation for a killed backup's and remove it, or both would reserve
// the same name and one copy be renamed over the other. Every backup succeeds and
// names a file of its own.
func TestBackup_ConcurrentBackupsKeepTheirOwnFiles(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []struct{ name, db string }{{"carol", "one/hookdedup.db"}, {"dave", "two/hookdedup.db"}} {
		if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", u.name, "--role", "admin", "--database", u.db); code != 0 {
			t.Fatalf("user add: %d\n%s", code, out)
		}
	}
	bin := hookdedupBinary(t)
	to := regexp.MustCompile(`backed up \S+ to (\S+):`)
	for round := 0; round < 60; round++ {
		bk := "bk"
		var wg sync.WaitGroup
		outs := make([]string, 2)
		codes := make([]int, 2)
		start := make(chan struct{})
		for i, db := range []string{"one/hookdedup.db", "two/hookdedup.db"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(bin, "backup", "--database", db, "--keep", "0", bk+"/")
				cmd.Dir = dir
				<-start
				out, err := cmd.CombinedOutput()
				outs[i] = string(out)
				if ee, ok := err.(*exec.ExitError); ok {
					codes[i] = ee.ExitCode()
				}
			}()
		}
		close(start)
		wg.Wait()
		for i := range outs {
			if codes[i] != 0 {
				t.Fatalf("round %d: a backup racing another database's failed: exit %d\n%s\nthe other said:\n%s", round, codes[i], outs[i], outs[1-i])
			}
		}
		a, b := to.FindStringSubmatch(outs[0]), to.FindStringSubmatch(outs[1])
		if a == nil || b == nil {
			t.Fatalf("round %d: %q %q", round, outs[0], outs[1])
		}
		if a[1] == b[1] {
			files, _ := os.ReadDir(filepath.Join(dir, bk))
			var names []string
			for _, f := range files {
				names = append(names, f.Name())
			}
			t.Fatalf("round %d: both backups report writing %s (one overwrote the other); the directory holds %v", round, a[1], names)
		}
	}
}

// TestRestore_RehearsalIsAnotherDatabase: the README's rehearsal, restore --copy into
// another file, is another database from then on, a second rehearsal over the first
// too: kept in a directory of its own under the usual file name (rehearse/hookdedup.db)
// and backed up into the shared directory with --keep, it must leave the live
// database's backups alone.
func TestRestore_RehearsalIsAnotherDatabase(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", "carol", "--role", "admin", "--database", "live/hookdedup.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	var live []string
	for range 2 {
		out, code := cli(t, dir, nil, "", "backup", "--database", "live/hookdedup.db", "--keep", "7", "bk/")
		if code != 0 {
			t.Fatalf("backup: %d\n%s", code, out)
		}
		live = append(live, regexp.MustCompile(`to (\S+):`).FindStringSubmatch(out)[1])
	}
	for _, b := range live { // a second rehearsal restores over the first
		if out, code := cli(t, dir, nil, "", "restore", "--copy", "--database", "rehearse/hookdedup.db", b); code != 0 {
			t.Fatalf("rehearsal restore: %d\n%s", code, out)
		}
	}
	// The rehearsal is used (a user added), then backed up with the timer's --keep.
	if out, code := cli(t, dir, nil, "another-long-password\n", "user", "add", "rita", "--role", "admin", "--database", "rehearse/hookdedup.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	out, code := cli(t, dir, nil, "", "backup", "--database", "rehearse/hookdedup.db", "--keep", "1", "bk/")
	if code != 0 {
		t.Fatalf("backup of the rehearsal: %d\n%s", code, out)
	}
	for _, p := range live {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("the rehearsal's backup removed the live database's backup %s: %v\n%s", p, err, out)
		}
	}
}

// TestRestore_RecoveryKeepsItsBackups: a database lost (or moved aside, as restore
// advises when it cannot read the one it would replace) is restored where none is now:
// it is the same database, so a backup over the very file it was restored from, and
// the --keep of its dated backups, go on as before.
func TestRestore_RecoveryKeepsItsBackups(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", "carol", "--role", "admin", "--database", "live/hookdedup.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "backup", "--database", "live/hookdedup.db", "daily.db"); code != 0 {
		t.Fatalf("backup: %d\n%s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "backup", "--database", "live/hookdedup.db", "--keep", "1", "bk/"); code != 0 {
		t.Fatalf("backup into bk/: %d\n%s", code, out)
	}
	if err := os.Rename(filepath.Join(dir, "live"), filepath.Join(dir, "lost")); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, dir, nil, "", "restore", "--database", "live/hookdedup.db", "daily.db"); code != 0 {
		t.Fatalf("restore: %d\n%s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "backup", "--database", "live/hookdedup.db", "daily.db"); code != 0 {
		t.Errorf("backup over the file it was restored from: %d, want it taken\n%s", code, out)
	}
	if out, code := cli(t, dir, nil, "", "backup", "--database", "live/hookdedup.db", "--keep", "1", "bk/"); code != 0 {
		t.Fatalf("backup into bk/: %d\n%s", code, out)
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "bk", "hookdedup-*.db")); len(kept) != 1 {
		t.Errorf("bk/ holds %v after --keep 1, want the newest backup alone", kept)
	}
}

// TestRestore_AnotherDatabasesBackupRefused: two instances (live/, other/) share a
// backup directory. Restoring the other instance's backup over live, by mistake, is
// refused, naming both identities: taken, live would share the other's identity, its
// --keep would remove the other's backups and a backup of it could write over the
// other's. With --copy it is restored as a database of its own.
func TestRestore_AnotherDatabasesBackupRefused(t *testing.T) {
	dir := t.TempDir()
	for _, db := range []string{"live/hookdedup.db", "other/hookdedup.db"} {
		if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", "carol", "--role", "admin", "--database", db); code != 0 {
			t.Fatalf("user add %s: %d\n%s", db, code, out)
		}
	}
	if out, code := cli(t, dir, nil, "", "backup", "--database", "other/hookdedup.db", "odaily.db"); code != 0 {
		t.Fatalf("backup other: %d\n%s", code, out)
	}
	live, other := filepath.Join(dir, "live", "hookdedup.db"), filepath.Join(dir, "other", "hookdedup.db")
	liveID, otherID := databaseIDOf(t, live), databaseIDOf(t, other)
	out, code := cli(t, dir, nil, "", "restore", "--database", "live/hookdedup.db", "odaily.db")
	if code == 0 || !strings.Contains(out, "another hookdedup database") || !strings.Contains(out, "--copy") {
		t.Errorf("restore of another database's backup over live: exit %d, want it refused, saying so and naming --copy:\n%s", code, out)
	}
	if got := databaseIDOf(t, live); got != liveID {
		t.Errorf("after the refusal live's identity is %s, was %s", got, liveID)
	}
	if out, code := cli(t, dir, nil, "", "restore", "--copy", "--database", "live/hookdedup.db", "odaily.db"); code != 0 {
		t.Fatalf("restore --copy: %d\n%s", code, out)
	}
	if got := databaseIDOf(t, live); got == otherID || got == liveID {
		t.Errorf("restored with --copy, live's identity is %s (live's was %s, other's %s), want a new one", got, liveID, otherID)
	}
}

// databaseIDOf reads a database's identity without writing to it.
func databaseIDOf(t *testing.T, path string) string {
	t.Helper()
	c, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var id string
	if err := c.QueryRow(`SELECT value FROM settings WHERE name = 'database_id'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestBackup_OverAnEarlierCopyLeavesNoSideFiles: the README's daily backup name is
// written over by a second backup the same day. Looking at what is there must not
// leave a -wal and -shm beside it, as a read-only open of a WAL database does.
func TestBackup_OverAnEarlierCopyLeavesNoSideFiles(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", "carol", "--role", "admin", "--database", "hookdedup.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	for range 2 {
		if out, code := cli(t, dir, nil, "", "backup", "--database", "hookdedup.db", "backups/hookdedup-2026-12-06.db"); code != 0 {
			t.Fatalf("backup: %d\n%s", code, out)
		}
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(filepath.Join(dir, "backups", "hookdedup-2026-12-06.db"+suffix)); err == nil {
			t.Errorf("a backup over an earlier copy left %s beside it", "hookdedup-2026-12-06.db"+suffix)
		}
	}
}

// TestBackup_StaleWALBesideTheFileRefused: a backup to FILE where no FILE is, but a
// FILE-wal that holds commits is (its database removed or moved without it), is
// refused, naming it, and nothing is written: the backup's first open would replay that
// other file's WAL into it, here its schema page, and it would be no hookdedup
// database. An empty -wal and a -shm hold nothing: they are removed, and the backup is
// written and reads as one.
func TestBackup_StaleWALBesideTheFileRefused(t *testing.T) {
	dir := t.TempDir()
	if out, code := cli(t, dir, nil, "a-long-enough-password\n", "user", "add", "carol", "--role", "admin", "--database", "hookdedup.db"); code != 0 {
		t.Fatalf("user add: %d\n%s", code, out)
	}
	// Another SQLite file with a commit in its WAL, as a crash leaves it.
	other := filepath.Join(dir, "other.db")
	wal := walAsACrashLeavesIt(t, other, `CREATE TABLE t (a)`, `INSERT INTO t VALUES (1)`)
	nightly := filepath.Join(dir, "nightly.db")
	writeFile(t, nightly+"-wal", wal)

	out, code := cli(t, dir, nil, "", "backup", "--database", "hookdedup.db", "nightly.db")
	if code != 1 || !strings.Contains(out, "nightly.db-wal holds transactions of a database that is no longer there") {
		t.Fatalf("backup beside a WAL that holds commits: exit %d\n%s\nwant exit 1 and a refusal naming nightly.db-wal", code, out)
	}
	if _, err := os.Stat(nightly); !os.IsNotExist(err) {
		t.Fatalf("the refused backup left a file at its name (%v)", err)
	}

	writeFile(t, nightly+"-wal", nil)
	writeFile(t, nightly+"-shm", make([]byte, 32768))
	if out, code := cli(t, dir, nil, "", "backup", "--database", "hookdedup.db", "nightly.db"); code != 0 {
		t.Fatalf("backup beside an empty WAL: exit %d\n%s", code, out)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(nightly + suffix); err == nil {
			t.Errorf("the backup left nightly.db%s beside it", suffix)
		}
	}
	if out, code := cli(t, dir, nil, "", "audit", "verify", "--database", "nightly.db"); code != 0 {
		t.Errorf("audit verify of the backup: exit %d\n%s", code, out)
	}
}
