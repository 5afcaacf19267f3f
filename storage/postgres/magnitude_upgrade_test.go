package postgres_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
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
	url, _ := urls.Load(db.(*postgres.DB))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	conn := postgrestest.Connect(t, url.(string))
	for _, q := range append(enginetest.MagnitudeDowngrade,
		`DELETE FROM migrations WHERE name = 'migrations/0027_money_magnitude.sql'`,
		`DELETE FROM migrations WHERE name = 'migrations/0028_stats_minor.sql'`) {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return openEngine(t, url.(string))
}
