package sqlite_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOpen_NoAmountUpgrade: a database whose ledger and suspects' totals an earlier
// version rolled up, without the count of what carried no amount, opened by this one.
func TestOpen_NoAmountUpgrade(t *testing.T) {
	enginetest.NoAmountUpgrade(t, engine, func(t *testing.T, db storage.Store) storage.Store {
		path := db.(*sqlite.DB).Path()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		execFile(t, path, `ALTER TABLE ledger_days DROP COLUMN no_amount`, `ALTER TABLE ledger_totals DROP COLUMN no_amount`,
			`ALTER TABLE suspect_totals DROP COLUMN no_amount`,
			`DELETE FROM migrations WHERE name = 'migrations/0029_no_amount.sql'`)
		return storagetest.OpenPath(t, path, sqlite.Options{})
	})
}
