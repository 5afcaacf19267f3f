package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

func TestCurrencyExponent(t *testing.T) {
	for code, want := range map[string]int{
		"EUR": 2, "usd": 2, "": 2, "XYZ": 2, "JPY": 0, "jpy": 0, "KRW": 0,
		"KWD": 3, "BHD": 3, "OMR": 3, "JOD": 3, "TND": 3, "IQD": 3, "LYD": 3, "CLF": 4,
	} {
		if got := storage.CurrencyExponent(code); got != want {
			t.Errorf("CurrencyExponent(%q) = %d, want %d", code, got, want)
		}
	}
}

func TestMajorUnits(t *testing.T) {
	for _, c := range []struct {
		amount, currency, want string
		ok                     bool
	}{
		{"41250", "EUR", "412.50", true},
		{"18250", "eur", "182.50", true},
		{"5", "USD", "0.05", true},
		{"0", "USD", "0.00", true},
		{"-1999", "USD", "-19.99", true},
		{"-0", "USD", "0.00", true},
		{"18000", "JPY", "18000", true},
		{"1250", "KWD", "1.250", true},
		{"7", "KWD", "0.007", true},
		{"12345", "CLF", "1.2345", true},
		{"0041250", "EUR", "412.50", true},
		{"12.5", "EUR", "0.125", true},                                       // a fraction of a cent is moved too, not dropped
		{"100", "", "1.00", true},                                            // no currency: two places
		{"1e+21", "EUR", "1e+21", false},                                     // not plain digits: kept as sent
		{"12,50", "EUR", "12,50", false},                                     // likewise
		{"", "EUR", "", false},                                               //
		{"-", "EUR", "-", false},                                             //
		{"1.", "EUR", "1.", false},                                           //
		{"99999999999999999999999", "EUR", "999999999999999999999.99", true}, // past float64, exact
	} {
		got, ok := storage.MajorUnits(c.amount, c.currency)
		if got != c.want || ok != c.ok {
			t.Errorf("MajorUnits(%q, %q) = %q, %v; want %q, %v", c.amount, c.currency, got, ok, c.want, c.ok)
		}
	}
}

func TestCurrencyCode(t *testing.T) {
	for in, want := range map[string]string{"eur": "EUR", " usd ": "USD", "": "", "a-very-long-currency-name": "A-VERY-LONG-CURR"} {
		if got := storage.CurrencyCode(in); got != want {
			t.Errorf("CurrencyCode(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustRecordMoney(tb testing.TB, db *sqlite.DB, key, hash, amount, currency string) *storage.Delivery {
	tb.Helper()
	d := delivery("pay", key, hash)
	d.Amount, d.Currency = amount, currency
	return storagetest.Record(tb, db, d, day)
}

// Amounts are summed per currency, never across currencies, both from the hourly totals
// and from the deliveries not rolled up yet.
func TestDB_DeliveryStats_PerCurrency(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	c := newClock(db)
	from := c.Now().Truncate(time.Hour)
	mustRecordMoney(t, db, "a", "h", "182.50", "EUR")
	mustRecordMoney(t, db, "a", "h", "182.50", "EUR") // duplicate
	mustRecordMoney(t, db, "b", "h", "40.00", "USD")
	mustRecordMoney(t, db, "b", "h", "40.00", "USD") // duplicate
	if _, err := db.RollupStats(ctx, 100); err != nil {
		t.Fatal(err)
	}
	// Not rolled up: counted as DeliveryStats reads.
	mustRecordMoney(t, db, "a", "h", "182.50", "EUR") // duplicate
	mustRecordMoney(t, db, "c", "h", "18000", "JPY")
	mustRecordMoney(t, db, "c", "h", "18000", "JPY") // duplicate
	mustRecordMoney(t, db, "d", "h", "", "")         // no amount
	mustRecordMoney(t, db, "e", "h", "7.25", "")     // an amount without a currency

	got, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range got {
		fmt.Fprintf(&b, "%s %s %q n=%d amt=%d/%.2f\n", s.Source, s.Outcome, s.Currency, s.Deliveries, s.WithAmount, s.Amount)
	}
	want := `pay accepted "" n=2 amt=1/7.25
pay accepted "EUR" n=1 amt=1/182.50
pay accepted "JPY" n=1 amt=1/18000.00
pay accepted "USD" n=1 amt=1/40.00
pay duplicate "EUR" n=2 amt=2/365.00
pay duplicate "JPY" n=1 amt=1/18000.00
pay duplicate "USD" n=1 amt=1/40.00
`
	if b.String() != want {
		t.Fatalf("stats:\n%s\nwant:\n%s", b.String(), want)
	}

	// Rolled up, the same figures.
	if _, err := db.RollupStats(ctx, 100); err != nil {
		t.Fatal(err)
	}
	again, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	for _, s := range again {
		fmt.Fprintf(&b, "%s %s %q n=%d amt=%d/%.2f\n", s.Source, s.Outcome, s.Currency, s.Deliveries, s.WithAmount, s.Amount)
	}
	if b.String() != want {
		t.Fatalf("stats rolled up:\n%s\nwant:\n%s", b.String(), want)
	}
	dups, err := db.RecentDuplicates(ctx, from, 10)
	if err != nil || len(dups) != 4 || dups[0].Currency != "JPY" || dups[0].Amount != "18000" {
		t.Fatalf("recent duplicates = %+v, %v", dups, err)
	}
}

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
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE deliveries DROP COLUMN currency`,
		`CREATE TABLE old_stats (source TEXT NOT NULL, hour INTEGER NOT NULL, outcome TEXT NOT NULL,
			deliveries INTEGER NOT NULL DEFAULT 0, mismatches INTEGER NOT NULL DEFAULT 0,
			with_amount INTEGER NOT NULL DEFAULT 0, amount REAL NOT NULL DEFAULT 0,
			PRIMARY KEY (source, hour, outcome)) WITHOUT ROWID`,
		`INSERT INTO old_stats SELECT source, hour, outcome, deliveries, mismatches, with_amount, amount FROM delivery_stats`,
		`DROP TABLE delivery_stats`,
		`ALTER TABLE old_stats RENAME TO delivery_stats`,
		`DELETE FROM migrations WHERE name LIKE '%0010_%'`,
		// The rebuilt table lacks the later money_mismatches column too: add it again.
		`DELETE FROM migrations WHERE name LIKE '%0015_%'`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

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
		fmt.Fprintf(&b, "%s %q n=%d amt=%.2f\n", s.Outcome, s.Currency, s.Deliveries, s.Amount)
	}
	want := `accepted "" n=1 amt=100.25
accepted "EUR" n=1 amt=5.00
duplicate "" n=1 amt=100.25
`
	if b.String() != want {
		t.Fatalf("stats after the upgrade:\n%s\nwant:\n%s", b.String(), want)
	}
}
