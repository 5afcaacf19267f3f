package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// A batch's transaction that fails is rolled back on the write connection itself, which
// stays in the pool: what it wrote is gone, and the next write begins a transaction of
// its own rather than running inside the failed one. Whether no transaction was open
// (SQLite had ended it) or one was, the connection is kept.
func TestRollback_EndsTheTransactionAndKeepsTheConnection(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "hookdedup.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	conn, err := db.write.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A connection made anew would not have this table.
	if _, err := conn.ExecContext(ctx, `CREATE TEMP TABLE this_connection (x)`); err != nil {
		t.Fatal(err)
	}
	rollback(conn) // no transaction open
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('rolled_back', 'yes')`); err != nil {
		t.Fatal(err)
	}
	rollback(conn)
	conn.Close()

	err = db.writeTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM temp.sqlite_master WHERE name = 'this_connection'`).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			t.Errorf("the write connection was replaced after a rollback")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM settings WHERE name = 'rolled_back'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the rolled back row is stored")
	}
}
