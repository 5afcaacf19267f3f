package postgres_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestOpen_NoAmountUpgrade: a database whose ledger and suspects' totals an earlier
// version rolled up, without the count of what carried no amount, opened by this one.
func TestOpen_NoAmountUpgrade(t *testing.T) {
	enginetest.NoAmountUpgrade(t, engine, func(t *testing.T, db storage.Store) storage.Store {
		url, _ := urls.Load(db.(*postgres.DB))
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		conn := postgrestest.Connect(t, url.(string))
		for _, q := range []string{`ALTER TABLE ledger_days DROP COLUMN no_amount`, `ALTER TABLE ledger_totals DROP COLUMN no_amount`,
			`ALTER TABLE suspect_totals DROP COLUMN no_amount`,
			`DELETE FROM migrations WHERE name = 'migrations/0018_no_amount.sql'`} {
			if _, err := conn.Exec(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		return openEngine(t, url.(string))
	})
}
