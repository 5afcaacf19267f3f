package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
