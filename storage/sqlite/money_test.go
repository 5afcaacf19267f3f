package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// A database from before currencies keeps its deliveries and hourly totals; both show
// with no currency.
func TestMigration_Currency(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newClock(db)
	from := c.Now().Truncate(time.Hour)
	d := mustRecordMoney(t, db, "a", "h", "100.25", "")
	mustRecordMoney(t, db, "a", "h", "100.25", "")
	if _, err := db.RollupStats(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the schema of before.
	execFile(t, path,
		`ALTER TABLE deliveries DROP COLUMN currency`,
		`CREATE TABLE old_stats (source TEXT NOT NULL, hour INTEGER NOT NULL, outcome TEXT NOT NULL,
			deliveries INTEGER NOT NULL DEFAULT 0, mismatches INTEGER NOT NULL DEFAULT 0,
			with_amount INTEGER NOT NULL DEFAULT 0, amount REAL NOT NULL DEFAULT 0,
			PRIMARY KEY (source, hour, outcome)) WITHOUT ROWID`,
		`INSERT INTO old_stats SELECT source, hour, outcome, deliveries, mismatches, with_amount, amount_minor / 100.0 FROM delivery_stats`,
		`DROP TABLE delivery_stats`,
		`ALTER TABLE old_stats RENAME TO delivery_stats`,
		`DELETE FROM migrations WHERE name LIKE '%0010_%'`,
		// The rebuilt table lacks the later money_mismatches and unsummed columns too: add
		// them again.
		`DELETE FROM migrations WHERE name LIKE '%0015_%'`,
		`DELETE FROM migrations WHERE name LIKE '%0035_%'`,
		// And its amounts are floats again, as they were then.
		`DELETE FROM migrations WHERE name LIKE '%0040_%'`,
	)

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(db)
	got, err := db.Delivery(ctx, d.ID)
	if err != nil || got.Amount != "100.25" || got.Currency != "" {
		t.Fatalf("delivery after the upgrade: amount %q currency %q, %v", got.Amount, got.Currency, err)
	}
	mustRecordMoney(t, db, "b", "h", "5.00", "EUR")
	stats, err := db.DeliveryStats(ctx, from, from.Add(2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range stats {
		fmt.Fprintf(&b, "%s %q n=%d amt=%s\n", s.Outcome, s.Currency, s.Deliveries, storage.FormatMinor(s.Minor, s.Currency))
	}
	want := `accepted "" n=1 amt=100.25
accepted "EUR" n=1 amt=5.00
duplicate "" n=1 amt=100.25
`
	if b.String() != want {
		t.Fatalf("stats after the upgrade:\n%s\nwant:\n%s", b.String(), want)
	}
}

func mustRecordMoney(tb testing.TB, db *sqlite.DB, key, hash, amount, currency string) *storage.Delivery {
	tb.Helper()
	d := delivery("pay", key, hash)
	d.Amount, d.Currency = amount, currency
	return storagetest.Record(tb, db, d, day)
}
