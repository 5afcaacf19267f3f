package storagetest

import (
	"database/sql"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// AddSuspect stores s as detection at intake would have flagged it (State open unless
// set; FlaggedAt is db.Now when zero) and returns it with its id. It writes through a
// connection of its own to db's file, as another process would: the console's tests
// need flags before the detection that makes them is part of their setup.
func AddSuspect(tb testing.TB, db *sqlite.DB, s storage.Suspect) storage.Suspect {
	tb.Helper()
	if s.State == "" {
		s.State = storage.SuspectOpen
	}
	if s.FlaggedAt.IsZero() {
		s.FlaggedAt = db.Now()
	}
	raw := rawConn(tb, db)
	defer raw.Close()
	err := raw.QueryRow(`INSERT INTO suspects (kind, delivery, other, source, other_source, rule, property, booking,
	amount, currency, first_seen, flagged_at, state, reviewed_by, reviewed_at, reason)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		string(s.Kind), s.Delivery, s.Other, s.Source, s.OtherSource, s.Rule, s.Property, s.Booking, s.Amount,
		s.Currency, unixMilli(s.FirstSeen), s.FlaggedAt.UnixMilli(), s.State, s.ReviewedBy,
		unixMilli(s.ReviewedAt), s.Reason).Scan(&s.ID)
	if err != nil {
		tb.Fatalf("add suspect: %v", err)
	}
	return s
}

// SetMoneyMismatch marks the delivery id a money mismatch, as detection at intake
// would have: a duplicate whose amount, currency or status differs from the first
// delivery's. It writes through a connection of its own, as AddSuspect does.
func SetMoneyMismatch(tb testing.TB, db *sqlite.DB, id int64) {
	tb.Helper()
	raw := rawConn(tb, db)
	defer raw.Close()
	res, err := raw.Exec(`UPDATE deliveries SET money_mismatch = 1, mismatch = 1 WHERE id = ?`, id)
	if err != nil {
		tb.Fatalf("set money mismatch: %v", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		tb.Fatalf("set money mismatch on delivery %d: %d rows (%v), want 1", id, n, err)
	}
}

// DeleteDelivery removes delivery id's row directly (enginetest.Engine.DeleteDelivery).
func DeleteDelivery(tb testing.TB, db *sqlite.DB, id int64) {
	tb.Helper()
	raw := rawConn(tb, db)
	defer raw.Close()
	if res, err := raw.Exec(`DELETE FROM deliveries WHERE id = ?`, id); err != nil {
		tb.Fatalf("delete delivery %d: %v", id, err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		tb.Fatalf("delete delivery %d: %d rows, want 1", id, n)
	}
}

// AddMigration records the migration name as applied, as a newer version would, without
// changing the schema.
func AddMigration(tb testing.TB, db *sqlite.DB, name string) {
	tb.Helper()
	raw := rawConn(tb, db)
	defer raw.Close()
	if _, err := raw.Exec(`INSERT INTO migrations (name, applied_at) VALUES (?, 0)`, name); err != nil {
		tb.Fatalf("add migration %s: %v", name, err)
	}
}

// unixMilli is t as the schema keeps times, 0 for none.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func rawConn(tb testing.TB, db *sqlite.DB) *sql.DB {
	tb.Helper()
	raw, err := sql.Open("sqlite3", loaderDSN(db.Path()))
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}
