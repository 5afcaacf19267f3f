package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// urls remembers the database each DB that the suite opened connects to, for Reopen
// and the fixtures.
var urls sync.Map // *postgres.DB → string

// TestEngine runs the engine-neutral suite against PostgreSQL: a database of its own
// per test, cloned from a migrated template, and a second DB on that database for what
// two replicas do together.
func TestEngine(t *testing.T) {
	enginetest.Run(t, engine)
}

// engine is PostgreSQL as the engine-neutral suite takes it.
var engine = enginetest.Engine{
	Open: func(tb testing.TB) storage.Store {
		url := postgrestest.NewDatabase(tb)
		return openEngine(tb, url)
	},
	Reopen: func(tb testing.TB, db storage.Store) storage.Store {
		url, _ := urls.Load(db.(*postgres.DB))
		return openEngine(tb, url.(string))
	},
	AddSuspect: func(tb testing.TB, db storage.Store, s storage.Suspect) storage.Suspect {
		tb.Helper()
		if s.State == "" {
			s.State = storage.SuspectOpen
		}
		if s.FlaggedAt.IsZero() {
			s.FlaggedAt = db.Clock()
		}
		conn := rawConn(tb, db)
		defer conn.Close(context.Background()) // not at the test's end: a test may add hundreds
		err := conn.QueryRow(context.Background(), `INSERT INTO suspects (kind, delivery, other, source, other_source,
	rule, property, booking, amount, currency, first_seen, flagged_at, state, reviewed_by, reviewed_at, reason)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id`,
			string(s.Kind), s.Delivery, s.Other, s.Source, s.OtherSource, s.Rule, s.Property, s.Booking, s.Amount,
			s.Currency, unixMilli(s.FirstSeen), s.FlaggedAt.UnixMilli(), s.State, s.ReviewedBy,
			unixMilli(s.ReviewedAt), s.Reason).Scan(&s.ID)
		if err != nil {
			tb.Fatalf("add suspect: %v", err)
		}
		return s
	},
	SetMoneyMismatch: func(tb testing.TB, db storage.Store, id int64) {
		tb.Helper()
		tag, err := rawConn(tb, db).Exec(context.Background(),
			`UPDATE deliveries SET money_mismatch = true, mismatch = true WHERE id = $1`, id)
		if err != nil || tag.RowsAffected() != 1 {
			tb.Fatalf("set money mismatch on delivery %d: %v (%d rows)", id, err, tag.RowsAffected())
		}
	},
	DeleteDelivery: func(tb testing.TB, db storage.Store, id int64) {
		tb.Helper()
		tag, err := rawConn(tb, db).Exec(context.Background(), `DELETE FROM deliveries WHERE id = $1`, id)
		if err != nil || tag.RowsAffected() != 1 {
			tb.Fatalf("delete delivery %d: %v (%d rows)", id, err, tag.RowsAffected())
		}
	},
	AddMigration: func(tb testing.TB, db storage.Store, name string) {
		tb.Helper()
		if _, err := rawConn(tb, db).Exec(context.Background(),
			`INSERT INTO migrations (name, applied_at) VALUES ($1, 0)`, name); err != nil {
			tb.Fatalf("add migration %s: %v", name, err)
		}
	},
	ThrottleKeys: func(tb testing.TB, db storage.Store) []string {
		tb.Helper()
		rows, err := rawConn(tb, db).Query(context.Background(), `SELECT scope FROM login_failures ORDER BY scope`)
		if err != nil {
			tb.Fatal(err)
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			tb.Fatal(err)
		}
		return keys
	},
	SetClock:     func(db storage.Store, now func() time.Time) { db.(*postgres.DB).Now = now },
	SetMoneyRead: func(db storage.Store, f func()) { db.(*postgres.DB).SetMoneyRead(f) },
}

// openEngine opens the database at url and closes it when tb ends.
func openEngine(tb testing.TB, url string) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(context.Background(), url, postgres.Options{BusyTimeout: time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	urls.Store(db, url)
	tb.Cleanup(func() {
		urls.Delete(db)
		db.Close()
	})
	return db
}

// rawConn is a connection of the test's own to db's database, closed when tb ends.
func rawConn(tb testing.TB, db storage.Store) *pgx.Conn {
	tb.Helper()
	url, _ := urls.Load(db.(*postgres.DB))
	conn, err := pgx.Connect(context.Background(), url.(string))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// unixMilli is t as the schema keeps times, 0 for none.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
