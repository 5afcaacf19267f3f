package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// TestWalbuf_SpillsRollbacksAndReaders writes through walbufVFS, under each
// synchronous setting, what the writer seldom does: transactions larger than its
// buffer and its page cache (SQLite spills frames to the log before the commit), one of
// them rolled back after spilling, and pages rewritten within a transaction after they
// were spilled (SQLite then writes the frame again in place and rewrites the checksums
// of the frames after it at the commit). After each commit a reader on the default VFS,
// with a file of its own, sees exactly what was committed, and so does a copy of the
// database and its log taken then, as a crash would leave them (opening it recovers
// the log, checking every frame's checksum); at the end the database passes SQLite's
// integrity check and reopens with the same rows.
func TestWalbuf_SpillsRollbacksAndReaders(t *testing.T) {
	if err := registerWalbuf(); err != nil {
		t.Fatal(err)
	}
	for _, sync := range []string{"FULL", "NORMAL"} {
		t.Run(sync, func(t *testing.T) { testWalbuf(t, sync) })
	}
}

func testWalbuf(t *testing.T, sync string) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "walbuf.db")
	dsnOf := func(path string) string {
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?_journal_mode=WAL&_synchronous=" + sync + "&_busy_timeout=5000"
	}
	dsn := dsnOf(path)
	open := func(dsn string) *sql.DB {
		t.Helper()
		db, err := sql.Open("sqlite3", dsn)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return db
	}
	w := open(dsn + "&vfs=" + walbufVFS)
	r := open(dsn)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := w.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A small page cache, so that a large transaction spills its pages to the log.
	exec(`PRAGMA cache_size = 50`)
	exec(`PRAGMA wal_autocheckpoint = 0`) // as serve's writer: its checkpointer has a connection of its own
	exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)`)
	row := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000+i%3000) }
	want := map[int]bool{}
	sees := func(db *sql.DB, who, when string) {
		t.Helper()
		var n int
		var sum int64
		if err := db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(v)), 0) FROM t`).Scan(&n, &sum); err != nil {
			t.Fatalf("%s: %s: read: %v", when, who, err)
		}
		var wantSum int64
		for i := range want {
			wantSum += int64(len(row(i)))
		}
		if n != len(want) || sum != wantSum {
			t.Fatalf("%s: %s sees %d rows of %d bytes; want %d of %d", when, who, n, sum, len(want), wantSum)
		}
	}
	copies := 0
	check := func(when string, crash bool) {
		t.Helper()
		sees(r, "the reader", when)
		if !crash {
			return
		}
		copies++
		copyPath := filepath.Join(dir, fmt.Sprintf("copy%d.db", copies))
		for _, suffix := range []string{"", "-wal"} {
			b, err := os.ReadFile(path + suffix)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(copyPath+suffix, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c := open(dsnOf(copyPath))
		sees(c, "a copy of the files", when)
		c.Close()
	}
	insert := func(from, to int, commit bool) {
		t.Helper()
		tx, err := w.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			if _, err := tx.ExecContext(ctx, `INSERT INTO t (id, v) VALUES (?, ?)`, i, row(i)); err != nil {
				t.Fatal(err)
			}
			// The transaction's first row again, once its page has been spilled.
			if i%97 == 0 {
				if _, err := tx.ExecContext(ctx, `UPDATE t SET v = ? WHERE id = ?`, row(from), from); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !commit {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			want[i] = true
		}
	}
	for i := range 200 { // small commits, one frame or a few each
		insert(i, i+1, true)
		check(fmt.Sprintf("commit %d", i), i%50 == 49)
	}
	insert(200, 3200, true) // about 8 MiB: spilled, and many times the buffer
	check("a large commit", true)
	insert(3200, 6200, false)
	check("a large transaction rolled back", true)
	insert(3200, 3300, true)
	check("a commit after the rollback", true)
	exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	insert(3300, 3400, true)
	check("a commit after the log started over", true)
	insert(3400, 3401, true)
	check("a small commit after a large one", true)

	// A transaction rolled back after spilling, then another connection commits (as
	// the command line may while serve runs), then the writer reads: what it had
	// spilled is not written over the other's frames.
	// The rolled-back transactions spill a few pages only, which the buffer holds whole
	// from the start of the log, where the other connection's frames go.
	for k, n := range []int{80, 100, 120, 150} {
		exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
		insert(10000, 10000+n, false)
		other := 7000 + k
		if _, err := r.ExecContext(ctx, `INSERT INTO t (id, v) VALUES (?, ?)`, other, row(other)); err != nil {
			t.Fatal(err)
		}
		want[other] = true
		when := fmt.Sprintf("another connection's commit after a rollback of %d rows", n)
		sees(w, "the writer", when)
		check(when, true)
	}
	insert(3401, 3402, true)
	check("the writer's commit after another's", true)

	var ok string
	if err := r.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity check: %q, %v", ok, err)
	}
	if walbufFrames() == 0 {
		t.Error("no frame went through a buffer: the log is written as SQLite writes it")
	}
	w.Close()
	r.Close()
	r = open(dsn)
	check("reopened", false)
}
