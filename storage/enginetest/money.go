package enginetest

import (
	"context"
	"fmt"
	"math"
	"strconv"
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

// The dashboard's money sums only the amounts that are plain decimal numbers
// (storage.PlainAmount) and counts the others as unsummed, as the ledger does, before
// the roll-up and after it: the number that "1.234,56" or "1e1" starts with is no money
// that was sent.
func TestDeliveryStats_OnlyPlainAmountsSummed(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	from := c.Now().Truncate(time.Hour)
	amounts := []string{"412.50", "-3", "0", "-0", "007", "0.1", "1.234,56", "12,50", "1e1", "2E-2", "n/a", " 5", "5 ",
		"+5", "5.", ".5", "-", "--5", "1.2.3", "1x5", "0x10", "Inf", "NaN",
		strings.Repeat("9", storage.MaxAmountWhole), strings.Repeat("9", storage.MaxAmountWhole+1),
		"-" + strings.Repeat("9", storage.MaxAmountWhole), "-" + strings.Repeat("9", storage.MaxAmountWhole+1),
		"-1." + strings.Repeat("1", storage.MaxAmountFrac), "1." + strings.Repeat("1", storage.MaxAmountFrac+1),
		"1.2." + strings.Repeat("1", storage.MaxAmountFrac), "5\x00", "5\x00x", "-5\x00.5"}
	currency := func(i int) string { return fmt.Sprintf("C%02d", i) }
	for i, amount := range amounts {
		for range 2 {
			mustRecordMoney(t, db, currency(i), "h", amount, currency(i))
		}
	}
	check := func(when string) {
		t.Helper()
		stats, err := db.DeliveryStats(ctx, from, c.Now().Add(time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]storage.StatBucket{}
		for _, b := range stats {
			if b.Outcome == storage.Duplicate {
				seen[b.Currency] = b
			}
		}
		for i, amount := range amounts {
			b := seen[currency(i)]
			want, unsummed := 0.0, int64(1)
			if storage.PlainAmount(amount) {
				want, _ = strconv.ParseFloat(amount, 64)
				want, unsummed = math.Abs(want), 0 // money caught counts by magnitude
			}
			if b.WithAmount != 1 || b.Unsummed != unsummed || math.Abs(b.Amount-want) > math.Abs(want)*1e-12 {
				t.Errorf("%s: the duplicate of amount %q: %d with an amount, summed %g, %d unsummed; want 1, %g, %d",
					when, amount, b.WithAmount, b.Amount, b.Unsummed, want, unsummed)
			}
		}
	}
	check("not rolled up")
	CatchUpRollups(t, db)
	check("rolled up")
}
