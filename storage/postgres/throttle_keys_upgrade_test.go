package postgres_test

import (
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestOpen_ThrottleKeysUpgrade: a database where an earlier version counted sign-in
// failures under scopes in clear, opened by this one, holds none of them.
func TestOpen_ThrottleKeysUpgrade(t *testing.T) {
	enginetest.ThrottleKeysUpgrade(t, engine, func(t *testing.T, db storage.Store, scope string, failures int, at time.Time) storage.Store {
		url, _ := urls.Load(db.(*postgres.DB))
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		conn := postgrestest.Connect(t, url.(string))
		if _, err := conn.Exec(t.Context(), `INSERT INTO login_failures (scope, failures, first_at, last_at) VALUES ($1, $2, $3, $3)`,
			scope, failures, at.UnixMilli()); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), `DELETE FROM migrations WHERE name = 'migrations/0023_throttle_keys.sql'`); err != nil {
			t.Fatal(err)
		}
		return openEngine(t, url.(string))
	})
}
