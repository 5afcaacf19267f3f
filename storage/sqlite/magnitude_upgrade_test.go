package sqlite_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOpen_MagnitudeUpgrade: a database whose running totals an earlier version summed
// with the amounts' signs, opened by this one.
func TestOpen_MagnitudeUpgrade(t *testing.T) {
	enginetest.MagnitudeUpgrade(t, engine, signedTotals)
}

// TestOpen_MagnitudeUpgradeLarge: the same upgrade of sums near an int64's limit.
func TestOpen_MagnitudeUpgradeLarge(t *testing.T) {
	enginetest.MagnitudeUpgradeLarge(t, engine, signedTotals)
}

// signedTotals makes db's running totals those an earlier version kept, and opens it
// again with this one.
func signedTotals(t *testing.T, db storage.Store) storage.Store {
	path := db.(*sqlite.DB).Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, path, append(enginetest.MagnitudeDowngrade,
		`DELETE FROM migrations WHERE name = 'migrations/0039_money_magnitude.sql'`,
		`DELETE FROM migrations WHERE name = 'migrations/0040_stats_minor.sql'`)...)
	return storagetest.OpenPath(t, path, sqlite.Options{})
}
