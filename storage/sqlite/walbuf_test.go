package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
)

// TestWalbuf_SpillsRollbacksAndReaders writes through walbufVFS what the writer seldom
// does: transactions larger than its buffer and its page cache (SQLite spills frames to
// the log before the commit), one of them rolled back after spilling, and a frame
// rewritten in place within a transaction. After each commit a reader on the default
// VFS, with a file of its own, sees exactly what was committed; at the end the database
// passes SQLite's integrity check and reopens with the same rows.
func TestWalbuf_SpillsRollbacksAndReaders(t *testing.T) {
	if err := registerWalbuf(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "walbuf.db")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000"
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
	exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)`)
	row := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000+i%3000) }
	want := map[int]bool{}
	check := func(when string) {
		t.Helper()
		var n int
		var sum int64
		if err := r.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(v)), 0) FROM t`).Scan(&n, &sum); err != nil {
			t.Fatalf("%s: read: %v", when, err)
		}
		var wantSum int64
		for i := range want {
			wantSum += int64(len(row(i)))
		}
		if n != len(want) || sum != wantSum {
			t.Fatalf("%s: the reader sees %d rows of %d bytes; want %d of %d", when, n, sum, len(want), wantSum)
		}
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
			// Rewritten within the transaction: a page already in the log is written again
			// in place once the cache has spilled it.
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
		check(fmt.Sprintf("commit %d", i))
	}
	insert(200, 3200, true) // about 8 MiB: spilled, and many times the buffer
	check("a large commit")
	insert(3200, 6200, false)
	check("a large transaction rolled back")
	insert(3200, 3300, true)
	check("a commit after the rollback")
	exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	insert(3300, 3400, true)
	check("a commit after the log started over")

	var ok string
	if err := w.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity check: %q, %v", ok, err)
	}
	w.Close()
	r.Close()
	r = open(dsn)
	check("reopened")
}
