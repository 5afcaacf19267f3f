package enginetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
		fmt.Fprintf(&b, "%s %s %q n=%d amt=%d/%s\n", s.Source, s.Outcome, s.Currency, s.Deliveries, s.WithAmount, storage.FormatMinor(s.Minor, s.Currency))
	}
	want := `pay accepted "" n=2 amt=1/7.25
pay accepted "EUR" n=1 amt=1/182.50
pay accepted "JPY" n=1 amt=1/18000
pay accepted "USD" n=1 amt=1/40.00
pay duplicate "EUR" n=2 amt=2/365.00
pay duplicate "JPY" n=1 amt=1/18000
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
		fmt.Fprintf(&b, "%s %s %q n=%d amt=%d/%s\n", s.Source, s.Outcome, s.Currency, s.Deliveries, s.WithAmount, storage.FormatMinor(s.Minor, s.Currency))
	}
	if b.String() != want {
		t.Fatalf("stats rolled up:\n%s\nwant:\n%s", b.String(), want)
	}
	dups, err := db.RecentDuplicates(ctx, from, 10)
	if err != nil || len(dups) != 4 || dups[0].Currency != "JPY" || dups[0].Amount != "18000" {
		t.Fatalf("recent duplicates = %+v, %v", dups, err)
	}
}

// The dashboard's money sums only the amounts that are whole numbers of minor units
// (storage.MoneyMinor) and counts the others as unsummed, as the ledger does, before
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
			want, unsummed := int64(0), int64(1)
			if n, ok := storage.MoneyMinor(amount, currency(i)); ok {
				want, unsummed = n, 0 // money caught counts by magnitude, as the ledger does
			}
			if b.WithAmount != 1 || b.Unsummed != unsummed || b.Minor != want {
				t.Errorf("%s: the duplicate of amount %q: %d with an amount, summed %d, %d unsummed; want 1, %d, %d",
					when, amount, b.WithAmount, b.Minor, b.Unsummed, want, unsummed)
			}
		}
	}
	check("not rolled up")
	CatchUpRollups(t, db)
	check("rolled up")
}

// TestDeliveryStats_MoneyIsTheLedgers checks that the dashboard's money caught, summed
// from the hourly totals and the deliveries not rolled up yet, is the ledger's money
// caught for the same duplicates, to the minor unit: an amount with more decimals than
// its currency has (JPY 100.5) is counted as unsummed by both, never rounded into one of
// them, and a sum past 2^53 minor units, which no float64 holds to the cent, is exact.
func TestDeliveryStats_MoneyIsTheLedgers(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	from := c.Now().Truncate(time.Hour)
	twice := func(key, amount, currency string) {
		for range 2 { // the first accepted, the second a duplicate caught
			mustRecordMoney(t, db, key, "h", amount, currency)
		}
	}
	twice("eur", "182.50", "EUR")
	twice("eur-neg", "-0.10", "EUR")
	twice("jpy-over", "100.5", "JPY")
	twice("jpy", "1200", "JPY")
	twice("kwd", "1.5", "KWD")
	twice("eur-sub", "0.001", "EUR")
	twice("text", "1.234,56", "EUR")
	for i := range 3 { // 3 × 3000000000000000001 cents: far past 2^53, within an int64
		twice(fmt.Sprintf("big%d", i), "30000000000000000.01", "USD")
	}
	const want = "EUR n=4 sum=182.60 unsummed=2\n" +
		"JPY n=2 sum=1200 unsummed=1\n" +
		"KWD n=1 sum=1.500 unsummed=0\n" +
		"USD n=3 sum=90000000000000000.03 unsummed=0\n"
	check := func(when string) {
		t.Helper()
		if got := ledgerCaught(t, db, storage.LedgerFilter{}); got != want {
			t.Errorf("%s: ledger's money caught:\n%swant:\n%s", when, got, want)
		}
		if got := dashboardCaught(t, db, from, c.Now()); got != want {
			t.Errorf("%s: dashboard's money caught:\n%swant the ledger's:\n%s", when, got, want)
		}
	}
	check("not rolled up")
	if _, err := db.RollupStats(ctx, 5); err != nil {
		t.Fatal(err)
	}
	check("partly rolled up")
	CatchUpRollups(t, db)
	check("rolled up")
	db = e.Reopen(t, db)
	e.SetClock(db, c.Now)
	check("another handle")
}

// ledgerCaught is the ledger's money caught per currency that f selects.
func ledgerCaught(t *testing.T, db storage.Store, f storage.LedgerFilter) string {
	t.Helper()
	l, err := db.Ledger(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range l.Totals {
		fmt.Fprintf(&b, "%s n=%d sum=%s unsummed=%d\n", r.Currency, r.Caught.Count,
			storage.FormatMinor(r.Caught.Minor, r.Currency), r.Caught.Unsummed)
	}
	return b.String()
}

// dashboardCaught is the dashboard's money caught from from to now per currency, its
// hourly periods added up as the dashboard adds them.
func dashboardCaught(t *testing.T, db storage.Store, from, now time.Time) string {
	t.Helper()
	stats, err := db.DeliveryStats(context.Background(), from, now.Add(time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]*storage.Money{}
	for _, s := range stats {
		if s.Outcome != storage.Duplicate || s.WithAmount == 0 {
			continue
		}
		if sums[s.Currency] == nil {
			sums[s.Currency] = &storage.Money{}
		}
		sums[s.Currency].Add(s.Money())
	}
	var b strings.Builder
	for _, code := range slices.SortedFunc(maps.Keys(sums), storage.CompareCurrency) {
		m := sums[code]
		fmt.Fprintf(&b, "%s n=%d sum=%s unsummed=%d\n", code, m.Count, storage.FormatMinor(m.Minor, code), m.Unsummed)
	}
	return b.String()
}

// StatsMinorDowngrade makes the hourly totals those an earlier version kept: floats in
// major units (StatsRealDowngrade), in which JPY 100.5 was summed, not counted as
// unsummed. The engines' upgrade tests run it, then remove the migration that makes
// the totals exact, before they open the database again.
var StatsMinorDowngrade = append(slices.Clone(StatsRealDowngrade),
	`UPDATE delivery_stats SET amount = amount + 100.5, unsummed = 0 WHERE currency = 'JPY' AND outcome = 'duplicate'`)

// StatsMinorUpgrade checks a database whose hourly totals an earlier version kept as
// floats, as downgrade makes it (StatsMinorDowngrade), opened by this one: the hours
// whose duplicates are still stored are counted again, exactly, and agree with the
// ledger to the minor unit (the over-precise JPY 100.5 unsummed by both, a sum past
// 2^53 minor units exact); an hour whose duplicates retention swept keeps its float
// sum rounded to the currency's minor unit.
func StatsMinorUpgrade(t *testing.T, e Engine, downgrade func(t *testing.T, db storage.Store) storage.Store) {
	db := e.Open(t)
	clk := newClock(e, db)
	twice := func(key, amount, currency string) {
		for range 2 { // the first accepted, the second a duplicate caught
			mustRecordMoney(t, db, key, "h", amount, currency)
		}
	}
	// Day 1: swept by retention before the upgrade.
	old := clk.Now().Truncate(time.Hour)
	twice("old-jpy", "100.5", "JPY")
	twice("old-eur", "10.25", "EUR")
	CatchUpRollups(t, db)
	clk.Add(48 * time.Hour)
	from := clk.Now().Truncate(time.Hour)
	twice("jpy-over", "100.5", "JPY")
	twice("jpy", "1200", "JPY")
	twice("eur", "182.50", "EUR")
	for i := range 3 {
		twice(fmt.Sprintf("big%d", i), "30000000000000000.01", "USD")
	}
	if n := sweepAll(t, db, clk.Now().Add(-24*time.Hour), 100); n != 4 {
		t.Fatalf("retention swept %d deliveries, want day 1's 4", n)
	}
	twice("late", "7.00", "EUR") // not rolled up at the upgrade
	const (
		want = "EUR n=2 sum=189.50 unsummed=0\n" +
			"JPY n=2 sum=1200 unsummed=1\n" +
			"USD n=3 sum=90000000000000000.03 unsummed=0\n"
		// Day 1's JPY 100.5, summed as a float then, is rounded (a tie to the even yen).
		wantOld = "EUR n=1 sum=10.25 unsummed=0\n" +
			"JPY n=1 sum=100 unsummed=0\n"
	)
	check := func(db storage.Store, when string, wantOld string) {
		t.Helper()
		if got := ledgerCaught(t, db, storage.LedgerFilter{From: from}); got != want {
			t.Errorf("%s: ledger's money caught:\n%swant:\n%s", when, got, want)
		}
		if got := dashboardCaught(t, db, from, clk.Now()); got != want {
			t.Errorf("%s: dashboard's money caught:\n%swant the ledger's:\n%s", when, got, want)
		}
		if got := dashboardCaught(t, db, old, old.Add(time.Hour)); got != wantOld {
			t.Errorf("%s: dashboard's money caught on the swept day:\n%swant:\n%s", when, got, wantOld)
		}
	}
	check(db, "before the upgrade", "EUR n=1 sum=10.25 unsummed=0\nJPY n=1 sum=0 unsummed=1\n")

	db = downgrade(t, db)
	e.SetClock(db, clk.Now)
	check(db, "upgraded", wantOld)
	CatchUpRollups(t, db)
	check(db, "upgraded and rolled up", wantOld)
	check(e.Reopen(t, db), "upgraded, another handle", wantOld)
}
