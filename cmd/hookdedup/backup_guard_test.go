package main

import (
	"database/sql"
	"path/filepath"
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
