package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// The money mismatch statement casts an amount to numeric only behind a pattern that
// makes the cast safe. The pattern must mean the same whatever the server's string
// settings: with standard_conforming_strings off (a legacy setting some servers keep),
// a backslash in a plain literal is an escape, and "\." would match any character, so
// an amount such as "1x5" would reach the cast and fail the whole request.
func TestRecord_MoneyMismatchLegacyStrings(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	open(t, url) // migrated
	conn := postgrestest.Connect(t, url)
	var name string
	if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+
		" SET standard_conforming_strings = off"); err != nil {
		t.Fatal(err)
	}
	db := open(t, url)
	opt := storage.ClaimOptions{TTL: 24 * time.Hour}
	first := &storage.Delivery{Source: "ota", Status: 200, Key: "evt_1", KeyMethod: "event_id", PayloadHash: "h1",
		Body: []byte(`{"id":"evt_1"}`), ContentType: "application/json", Amount: "105", Currency: "EUR"}
	if err := db.Record(t.Context(), first, opt); err != nil {
		t.Fatal(err)
	}
	dup := &storage.Delivery{Source: "ota", Status: 200, Key: "evt_1", KeyMethod: "event_id", PayloadHash: "h2",
		Body: []byte(`{"id":"evt_1","x":1}`), ContentType: "application/json", Amount: "1x5", Currency: "EUR"}
	if err := db.Record(t.Context(), dup, opt); err != nil {
		t.Fatalf("a duplicate whose amount is no number fails its request: %v", err)
	}
	if dup.Outcome != storage.Duplicate || !dup.MoneyMismatch {
		t.Errorf("duplicate: outcome %s, money mismatch %v; want duplicate, true", dup.Outcome, dup.MoneyMismatch)
	}
	// The dashboard's sums read amounts through the pattern too ("1x5" is unsummed).
	if _, err := db.RollupStats(t.Context(), 1000); err != nil {
		t.Errorf("roll-up of the dashboard's totals: %v", err)
	}
	if _, err := db.DeliveryStats(t.Context(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour), time.Hour); err != nil {
		t.Errorf("the dashboard's totals: %v", err)
	}
}
