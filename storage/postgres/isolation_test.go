package postgres_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestWriteTx_ReadCommittedWhateverTheDefault: on a server whose transactions default
// to repeatable read (default_transaction_isolation, which an operator may set for
// other applications), intake and every write still read what committed before each
// of their statements: concurrent claims each win or lose once, concurrent audit rows
// chain, and reprocesses of one operator sent at once still add up against the
// threshold, the check taken after the lock it waited for.
func TestWriteTx_ReadCommittedWhateverTheDefault(t *testing.T) {
	e := enginetest.Engine{
		Open: func(tb testing.TB) storage.Store {
			u, err := url.Parse(postgrestest.NewDatabase(tb))
			if err != nil {
				tb.Fatal(err)
			}
			u.RawQuery += "&default_transaction_isolation=" + url.PathEscape("repeatable read")
			return openEngine(tb, u.String())
		},
		Reopen: func(tb testing.TB, db storage.Store) storage.Store {
			u, _ := urls.Load(db.(*postgres.DB))
			return openEngine(tb, u.(string))
		},
		SetClock: func(db storage.Store, now func() time.Time) { db.(*postgres.DB).Now = now },
	}
	for name, test := range map[string]func(*testing.T, enginetest.Engine){
		"Record_Concurrent":            enginetest.TestRecord_Concurrent,
		"AuditChain_ConcurrentWriters": enginetest.TestAuditChain_ConcurrentWriters,
		"FourEyes_AtOnce":              enginetest.TestFourEyes_AtOnce,
	} {
		t.Run(name, func(t *testing.T) { test(t, e) })
	}
}
