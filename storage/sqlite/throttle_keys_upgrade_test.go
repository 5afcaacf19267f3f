package sqlite_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOpen_ThrottleKeysUpgrade: a database where an earlier version counted sign-in
// failures under scopes in clear, opened by this one, holds none of them, not even in
// the file's free pages.
func TestOpen_ThrottleKeysUpgrade(t *testing.T) {
	var path, clear string
	var upgraded *sqlite.DB
	enginetest.ThrottleKeysUpgrade(t, engine, func(t *testing.T, db storage.Store, scope string, failures int, at time.Time) storage.Store {
		path, clear = db.(*sqlite.DB).Path(), scope
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		raw := rawDB(t, path)
		// Others beside it, over many pages: a table's pages other than its first are
		// freed by the delete, and kept as they were unless overwritten.
		for i := range 500 {
			s := scope
			if i > 0 {
				s = fmt.Sprintf("%s-%03d %s", scope, i, strings.Repeat("x", 100))
			}
			if _, err := raw.Exec(`INSERT INTO login_failures (scope, failures, first_at, last_at) VALUES (?, ?, ?, ?)`,
				s, failures, at.UnixMilli(), at.UnixMilli()); err != nil {
				t.Fatal(err)
			}
		}
		rawExec(t, raw, `DELETE FROM migrations WHERE name = 'migrations/0036_throttle_keys.sql'`)
		raw.Close()
		if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(clear)) {
			t.Fatalf("the file before the upgrade does not hold %q", clear)
		}
		upgraded = storagetest.OpenPath(t, path, sqlite.Options{})
		return upgraded
	})
	if t.Failed() {
		return
	}
	// Closed, the last connection moves the write-ahead log into the file.
	if err := upgraded.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal"} {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(clear)) {
			t.Errorf("%s still holds %q after the upgrade", f, clear)
		}
	}
}
