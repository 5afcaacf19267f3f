package enginetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestMoney_SumsMagnitudes checks that the ledger, the suspects' money at stake and the
// dashboard's money caught count each amount by its magnitude: a refund one source
// sends as "-50.00" and a charge another sends as "50.00" are 100.00 put at risk, not
// 0.00, before the roll-ups and after them.
func TestMoney_SumsMagnitudes(t *testing.T, e Engine) {
	db := e.Open(t)
	c := newClock(e, db)
	from := c.Now().Truncate(time.Hour)
	recordRefund(t, db, "r", "h", "-182.50")
	recordRefund(t, db, "r", "h", "-182.50") // caught 182.50
	recordRefund(t, db, "c", "h", "50.00")
	recordRefund(t, db, "c", "h", "50.00") // caught 50.00
	recordRefund(t, db, "n", "h", "-40")
	recordRefund(t, db, "n", "h2", "-50") // caught 50.00, and a money mismatch of 50.00
	for i, amount := range []string{"-30.00", "30.00", "-0.25"} {
		e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectCorrelation, Delivery: int64(100 + i), Source: "pay",
			Property: "P1", Amount: amount, Currency: "EUR", FlaggedAt: c.Now()})
	}
	const (
		wantLedger = "EUR caught=3/282.50 mm=1/50.00 corr=3/60.25 risk=110.25\n"
		wantStakes = "correlation open \"EUR\" n=3 minor=6025 unsummed=0\n"
		wantCaught = "EUR n=3 amt=3/282.50\n"
	)
	check := func(when string) {
		t.Helper()
		if got := magnitudeLedger(t, db); got != wantLedger {
			t.Errorf("%s: ledger:\n%swant:\n%s", when, got, wantLedger)
		}
		if got := magnitudeStakes(t, db); got != wantStakes {
			t.Errorf("%s: suspects' money at stake:\n%swant:\n%s", when, got, wantStakes)
		}
		if got := magnitudeCaught(t, db, from, c.Now()); got != wantCaught {
			t.Errorf("%s: dashboard's money caught:\n%swant:\n%s", when, got, wantCaught)
		}
	}
	check("before the roll-ups")
	CatchUpRollups(t, db)
	check("after the roll-ups")
}

// StatsRealDowngrade makes the hourly totals' sums floats in major units again, as an
// earlier version kept them (minor units divided by the currency's exponent, for the
// currencies these tests use). The engines' upgrade tests run it, then remove the
// migration that made them exact, before they open the database again.
var StatsRealDowngrade = []string{
	`ALTER TABLE delivery_stats ADD COLUMN amount DOUBLE PRECISION NOT NULL DEFAULT 0`,
	`UPDATE delivery_stats SET amount = amount_minor / CASE currency WHEN 'JPY' THEN 1.0 WHEN 'KWD' THEN 1000.0 ELSE 100.0 END`,
	`ALTER TABLE delivery_stats DROP COLUMN amount_minor`,
}

// MagnitudeDowngrade turns the running totals of a database whose every amount is
// negative into those an earlier version, which summed amounts with their signs, kept:
// the hourly ones floats again (StatsRealDowngrade), and each sum negated. The engines'
// upgrade tests run it, then remove the migrations that count magnitudes and make the
// hourly sums exact, before they open the database again.
var MagnitudeDowngrade = append(slices.Clone(StatsRealDowngrade),
	`UPDATE ledger_days SET amount = -amount`,
	`UPDATE ledger_totals SET amount = -amount`,
	`UPDATE delivery_stats SET amount = -amount`,
	`UPDATE suspect_totals SET amount_high = -amount_high, amount_low = -amount_low`,
)

// MagnitudeUpgrade checks a database whose running totals an earlier version summed
// with the amounts' signs, as downgrade makes it (MagnitudeDowngrade), opened by this
// one: the ledger, the suspects' money at stake and the dashboard's money caught count
// the negative amounts still stored by their magnitude, and a day whose duplicates
// retention swept keeps what it summed.
func MagnitudeUpgrade(t *testing.T, e Engine, downgrade func(t *testing.T, db storage.Store) storage.Store) {
	db := e.Open(t)
	clk := newClock(e, db)
	// Day 1: swept by retention before the upgrade.
	recordRefund(t, db, "old", "h", "-20.00")
	recordRefund(t, db, "old", "h", "-20.00")
	CatchUpRollups(t, db)
	clk.Add(48 * time.Hour)
	from := clk.Now().Truncate(time.Hour)
	recordRefund(t, db, "r", "h", "-182.50")
	recordRefund(t, db, "r", "h", "-182.50") // caught 182.50
	recordRefund(t, db, "n", "h", "-40")
	recordRefund(t, db, "n", "h2", "-50") // caught 50.00, and a money mismatch of 50.00
	for i, amount := range []string{"-30.00", "-0.25"} {
		e.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectCorrelation, Delivery: int64(100 + i), Source: "pay",
			Property: "P1", Amount: amount, Currency: "EUR", FlaggedAt: clk.Now()})
	}
	if n := sweepAll(t, db, clk.Now().Add(-24*time.Hour), 100); n != 2 {
		t.Fatalf("retention swept %d deliveries, want day 1's 2", n)
	}
	const (
		wantStakes = "correlation open \"EUR\" n=2 minor=3025 unsummed=0\n"
		wantCaught = "EUR n=2 amt=2/232.50\n"
	)
	check := func(db storage.Store, when, wantLedger string) {
		t.Helper()
		if got := magnitudeLedger(t, db); got != wantLedger {
			t.Errorf("%s: ledger:\n%swant:\n%s", when, got, wantLedger)
		}
		if got := magnitudeStakes(t, db); got != wantStakes {
			t.Errorf("%s: suspects' money at stake:\n%swant:\n%s", when, got, wantStakes)
		}
		if got := magnitudeCaught(t, db, from, clk.Now()); got != wantCaught {
			t.Errorf("%s: dashboard's money caught:\n%swant:\n%s", when, got, wantCaught)
		}
	}
	check(db, "before the upgrade", "EUR caught=3/252.50 mm=1/50.00 corr=2/30.25 risk=80.25\n")

	db = downgrade(t, db)
	e.SetClock(db, clk.Now)
	// Day 1's refund is gone: its day keeps the sum an earlier version made of it.
	const upgraded = "EUR caught=3/212.50 mm=1/50.00 corr=2/30.25 risk=80.25\n"
	check(db, "upgraded", upgraded)
	CatchUpRollups(t, db)
	check(db, "upgraded and rolled up", upgraded)
	check(e.Reopen(t, db), "upgraded, another handle", upgraded)
}

// recordRefund records a delivery of source "pay" with amount in EUR.
func recordRefund(t *testing.T, db storage.Store, key, hash, amount string) *storage.Delivery {
	t.Helper()
	d := delivery("pay", key, hash)
	d.Property, d.Booking, d.EventStatus, d.Amount, d.Currency = "P1", "B-"+key, "refunded", amount, "EUR"
	return record(t, db, d, storage.ClaimOptions{TTL: time.Hour})
}

// magnitudeLedger is the ledger's totals per currency.
func magnitudeLedger(t *testing.T, db storage.Store) string {
	t.Helper()
	l, err := db.Ledger(context.Background(), storage.LedgerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range l.Totals {
		fmt.Fprintf(&b, "%s caught=%d/%s mm=%d/%s corr=%d/%s risk=%s\n", r.Currency,
			r.Caught.Count, storage.FormatMinor(r.Caught.Minor, r.Currency),
			r.MoneyMismatch.Count, storage.FormatMinor(r.MoneyMismatch.Minor, r.Currency),
			r.Correlation.Count, storage.FormatMinor(r.Correlation.Minor, r.Currency),
			storage.FormatMinor(r.AtRisk().Minor, r.Currency))
	}
	return b.String()
}

// magnitudeStakes is the suspects' counts and money at stake.
func magnitudeStakes(t *testing.T, db storage.Store) string {
	t.Helper()
	cs, err := db.SuspectCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return formatSuspectCounts(cs)
}

// magnitudeCaught is the dashboard's money caught from from to now, per currency.
func magnitudeCaught(t *testing.T, db storage.Store, from, now time.Time) string {
	t.Helper()
	got, err := db.DeliveryStats(context.Background(), from, now.Add(time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range got {
		if s.Outcome == storage.Duplicate {
			fmt.Fprintf(&b, "%s n=%d amt=%d/%s\n", s.Currency, s.Deliveries, s.WithAmount, storage.FormatMinor(s.Minor, s.Currency))
		}
	}
	return b.String()
}

// MagnitudeUpgradeLarge checks the upgrade of MagnitudeUpgrade on sums near the limit
// of a 64-bit count of minor units: what the upgrade adds to a day's total (twice each
// negative amount) may not fit an int64 though the total it makes does, and must never
// wrap into a sum of money that was not sent.
func MagnitudeUpgradeLarge(t *testing.T, e Engine, downgrade func(t *testing.T, db storage.Store) storage.Store) {
	db := e.Open(t)
	clk := newClock(e, db)
	from := clk.Now().Truncate(time.Hour)
	for range 4 { // one accepted, three duplicates: 3 × 3e18 cents fits an int64, 6 × 3e18 does not
		recordAmount(t, db, "big", "h", "-30000000000000000.00", "EUR")
	}
	for range 2 { // 2 × 5e18 cents does not fit an int64, 5e18 does
		recordAmount(t, db, "huge", "h", "-50000000000000000.00", "USD")
	}
	const (
		wantLedger = "EUR caught=3/90000000000000000.00 mm=0/0.00 corr=0/0.00 risk=0.00\n" +
			"USD caught=1/50000000000000000.00 mm=0/0.00 corr=0/0.00 risk=0.00\n"
		wantCaught = "EUR n=3 amt=3/90000000000000000.00\nUSD n=1 amt=1/50000000000000000.00\n"
	)
	check := func(db storage.Store, when string) {
		t.Helper()
		if got := magnitudeLedger(t, db); got != wantLedger {
			t.Errorf("%s: ledger:\n%swant:\n%s", when, got, wantLedger)
		}
		if got := magnitudeCaught(t, db, from, clk.Now()); got != wantCaught {
			t.Errorf("%s: dashboard's money caught:\n%swant:\n%s", when, got, wantCaught)
		}
	}
	CatchUpRollups(t, db)
	check(db, "before the upgrade")
	db = downgrade(t, db)
	e.SetClock(db, clk.Now)
	check(db, "upgraded")
	CatchUpRollups(t, db)
	check(db, "upgraded and rolled up")
}

// recordAmount records a delivery of source "pay" with amount in currency.
func recordAmount(t *testing.T, db storage.Store, key, hash, amount, currency string) *storage.Delivery {
	t.Helper()
	d := delivery("pay", key, hash)
	d.Property, d.Booking, d.EventStatus, d.Amount, d.Currency = "P1", "B-"+key, "refunded", amount, currency
	return record(t, db, d, storage.ClaimOptions{TTL: time.Hour})
}
