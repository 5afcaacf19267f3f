package sqlite_test

import (
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestEngine runs the engine-neutral suite against SQLite: a file in a temp dir per
// test, and a second handle on that file for what two processes do together.
func TestEngine(t *testing.T) {
	enginetest.Run(t, engine)
}

// engine is SQLite as the engine-neutral suite takes it.
var engine = enginetest.Engine{
	Open: func(tb testing.TB) storage.Store { return storagetest.Open(tb) },
	Reopen: func(tb testing.TB, db storage.Store) storage.Store {
		return storagetest.OpenPath(tb, db.(*sqlite.DB).Path(), sqlite.Options{BusyTimeout: time.Minute})
	},
	AddSuspect: func(tb testing.TB, db storage.Store, s storage.Suspect) storage.Suspect {
		return storagetest.AddSuspect(tb, db.(*sqlite.DB), s)
	},
	SetMoneyMismatch: func(tb testing.TB, db storage.Store, id int64) {
		storagetest.SetMoneyMismatch(tb, db.(*sqlite.DB), id)
	},
	DeleteDelivery: func(tb testing.TB, db storage.Store, id int64) {
		storagetest.DeleteDelivery(tb, db.(*sqlite.DB), id)
	},
	AddMigration: func(tb testing.TB, db storage.Store, name string) {
		storagetest.AddMigration(tb, db.(*sqlite.DB), name)
	},
	ThrottleKeys: func(tb testing.TB, db storage.Store) []string {
		tb.Helper()
		return throttleKeys(tb, db.(*sqlite.DB).Path())
	},
	SetClock:     func(db storage.Store, now func() time.Time) { db.(*sqlite.DB).Now = now },
	SetMoneyRead: func(db storage.Store, f func()) { db.(*sqlite.DB).SetMoneyRead(f) },
}
