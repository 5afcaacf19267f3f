package enginetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func mustRecordMoney(tb testing.TB, db storage.Store, key, hash, amount, currency string) *storage.Delivery {
	tb.Helper()
	d := delivery("pay", key, hash)
	d.Amount, d.Currency = amount, currency
	return record(tb, db, d, day)
}

// Amounts are summed per currency, never across currencies, both from the hourly totals
// and from the deliveries not rolled up yet.
func TestDeliveryStats_PerCurrency(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
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
