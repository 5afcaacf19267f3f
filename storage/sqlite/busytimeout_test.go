package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// Each write's wait for the lock sets the write connection's busy timeout to what is left
// of the wait and back to the whole one after the BEGIN, the same text every time: the
// whole timeout is in force inside every write, not the wait of an earlier one. The
// connection keeps its statements prepared by their text; SQLite applies a PRAGMA that
// sets a value as it prepares it, and marks it to be prepared again each time it runs,
// so one found prepared still sets its value.
func TestWriteTx_BusyTimeoutBackEveryTime(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "hookdedup.db"), Options{BusyTimeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 4 {
		// A deadline sooner than the busy timeout sets a shorter wait for the BEGIN.
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1000+100*i)*time.Millisecond)
		var ms int
		err := db.writeTx(ctx, func(tx *sql.Tx) error {
			// Read through the pragma's table, whose value is read as the query runs.
			return tx.QueryRowContext(ctx, `SELECT * FROM pragma_busy_timeout`).Scan(&ms)
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if ms != 4000 {
			t.Fatalf("write %d: busy timeout %d ms inside the transaction, want 4000", i, ms)
		}
	}
}
