package postgres_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestOpen_StatsMinorUpgrade: a database whose hourly totals an earlier version kept as
// floats, opened by this one.
func TestOpen_StatsMinorUpgrade(t *testing.T) {
	enginetest.StatsMinorUpgrade(t, engine, func(t *testing.T, db storage.Store) storage.Store {
		url, _ := urls.Load(db.(*postgres.DB))
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		conn := postgrestest.Connect(t, url.(string))
		for _, q := range append(enginetest.StatsMinorDowngrade, `DELETE FROM migrations WHERE name = 'migrations/0028_stats_minor.sql'`) {
			if _, err := conn.Exec(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		return openEngine(t, url.(string))
	})
}
