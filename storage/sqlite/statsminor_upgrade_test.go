package sqlite_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOpen_StatsMinorUpgrade: a database whose hourly totals an earlier version kept as
// floats, opened by this one.
func TestOpen_StatsMinorUpgrade(t *testing.T) {
	enginetest.StatsMinorUpgrade(t, engine, func(t *testing.T, db storage.Store) storage.Store {
		path := db.(*sqlite.DB).Path()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		execFile(t, path, append(enginetest.StatsMinorDowngrade,
			`DELETE FROM migrations WHERE name = 'migrations/0040_stats_minor.sql'`)...)
		return storagetest.OpenPath(t, path, sqlite.Options{})
	})
}
