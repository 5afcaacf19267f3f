package sqlite_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// newClock sets db's clock to one that stands still at a fixed time until moved.
func newClock(db *sqlite.DB) *storagetest.Clock {
	c := storagetest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	db.Now = c.Now
	return c
}

// delivery is a delivery as the receiver records it, answered 200 once stored.
func delivery(source, key, hash string) *storage.Delivery {
	return &storage.Delivery{Source: source, Status: 200, Key: key, KeyMethod: "event_id", PayloadHash: hash,
		Body: []byte(`{"id":"` + key + `"}`), ContentType: "application/json"}
}

var day = storage.ClaimOptions{TTL: 24 * time.Hour}

// TestDB_SweepExpired_Plan: the claims sweep finds what it may delete through the index
// of settled and released claims alone: not every claim, and not the keys still owed
// downstream, which it keeps however long expired and would otherwise read past in
// every batch.
func TestDB_SweepExpired_Plan(t *testing.T) {
	plan, err := storagetest.Open(t).ExplainSweepExpired(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "INDEX claims_expiring (expires_at<?)") || strings.Contains(plan, "SCAN claims") ||
		strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("claims sweep plan:\n%s", plan)
	}
}

// bk is a delivery of a booking's refund whose business key is business.
func bk(source, key, business string) *storage.Delivery {
	d := delivery(source, key, "h-"+key)
	d.BusinessKey = business
	d.Property, d.Booking, d.Amount, d.Currency = "p1", "b1", "80.00", "EUR"
	return d
}

// rawDB opens the database file at path directly, as someone with the file would.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

func rawExec(t testing.TB, raw *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// execFile runs stmts on the database file at path through a connection of its own,
// closed before it returns: how the migration tests put a file back to an older schema.
func execFile(t testing.TB, path string, stmts ...string) {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rawExec(t, raw, stmts...)
}

// poisonDeliveries makes the database file at path refuse, from any connection, to store
// a delivery whose key is "poison", as a disk error would refuse one batch; it returns
// a connection of the test's own to the file.
func poisonDeliveries(t *testing.T, path string) *sql.DB {
	t.Helper()
	raw := rawDB(t, path)
	if _, err := raw.Exec(`CREATE TRIGGER poison BEFORE INSERT ON deliveries WHEN NEW.key = 'poison'
BEGIN SELECT RAISE(ABORT, 'forced failure'); END`); err != nil {
		t.Fatal(err)
	}
	return raw
}

// throttleKeys returns the keys login_failures holds in the database file at path,
// sorted, read through a connection of its own, closed before it returns.
func throttleKeys(t testing.TB, path string) []string {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT scope FROM login_failures ORDER BY scope`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}
