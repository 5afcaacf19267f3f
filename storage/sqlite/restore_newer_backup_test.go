package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestRestore_NewerBackup: a backup that a newer version took of its own schema is
// refused by this version's restore, as README's "Going back" says. The refusal is the
// backup's: it names the backup and the migrations this version lacks, and says that the
// newer version restores it, rather than blaming "the database" at the path of the
// interim copy beside it (".hookdedup.db.123.tmp", gone by the time the operator looks)
// and advising to restore a backup, which is what the operator was doing. The database
// at the path stays as it was.
func TestRestore_NewerBackup(t *testing.T) {
	dir := t.TempDir()
	live, backup := filepath.Join(dir, "hookdedup.db"), filepath.Join(dir, "nightly.db")
	db := backedUp(t, live, backup, numberedKeys(3)...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, backup, `INSERT INTO migrations (name, applied_at) VALUES ('migrations/9999_future.sql', 1)`)
	before, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	for _, restore := range []struct {
		name string
		run  func(context.Context, string, string) (sqlite.RestoreInfo, error)
		to   string
	}{
		{"over the database", sqlite.Restore, live},
		{"as a copy", sqlite.RestoreCopy, filepath.Join(dir, "rehearsal.db")},
	} {
		_, err := restore.run(context.Background(), backup, restore.to)
		if err == nil {
			t.Fatalf("restore %s of a backup of a newer schema succeeded", restore.name)
		}
		msg := err.Error()
		want := "from " + backup + ": the backup is of a newer schema than this hookdedup knows (migrations 9999_future.sql): restore it with the version that took it, or a later one"
		if !strings.Contains(msg, want) || strings.Contains(msg, ".tmp") {
			t.Errorf("restore %s of a backup of a newer schema: %v\nwant it to say: %s", restore.name, err, want)
		}
	}
	after, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Error("the refused restore changed the database")
	}
	if _, err := os.Stat(filepath.Join(dir, "rehearsal.db")); !os.IsNotExist(err) {
		t.Errorf("the refused restore as a copy left a database: %v", err)
	}
}
