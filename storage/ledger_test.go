package storage_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

func ledgerPlaces(rows []storage.LedgerRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s/%s/%s/%s ", r.Day.Format("01-02"), r.Source, r.Property, r.Currency)
	}
	return strings.TrimSpace(b.String())
}

// The builder merges the rows that are not in the daily totals into them in the
// ledger's order (newest day first, then source, property and currency, no currency
// last, byte by byte), stops at the limit, and totals every row however many are left out.
func TestLedgerBuilderOrderLimitTotals(t *testing.T) {
	const day2 = 20_000 // 2024-10-04
	day1 := int64(day2 - 1)
	build := func(limit int) (storage.Ledger, int) {
		b := storage.NewLedgerBuilder(limit)
		b.Duplicate(storage.LedgerKey{Day: day1, Source: "a", Property: "p", Currency: "EUR"}, "1.00", false)
		b.Duplicate(storage.LedgerKey{Day: day2, Source: "a", Property: "p", Currency: ""}, "7", false)
		b.Duplicate(storage.LedgerKey{Day: day2, Source: "B", Property: "p", Currency: "EUR"}, "2.00", true)
		b.Suspect(storage.LedgerKey{Day: day2, Source: "a", Property: "p", Currency: "EUR"}, storage.SuspectBusinessKey, "open", "3.00", 9)
		b.Suspect(storage.LedgerKey{Day: day2, Source: "a", Property: "p", Currency: "EUR"}, storage.SuspectCorrelation, "open", "3.00", 9)
		b.Total("EUR", storage.LedgerCaught, storage.Money{Count: 2, Minor: 1000})
		read := 0
		for _, d := range []struct {
			k storage.LedgerKey
			m storage.Money
		}{
			{storage.LedgerKey{Day: day2, Source: "a", Property: "p", Currency: "EUR"}, storage.Money{Count: 1, Minor: 400}},
			{storage.LedgerKey{Day: day2, Source: "a", Property: "p", Currency: "USD"}, storage.Money{Count: 1, Minor: 600}},
		} {
			read++
			if !b.DayTotal(d.k, storage.LedgerCaught, d.m) {
				break
			}
		}
		return b.Result(), read
	}

	l, _ := build(0)
	want := "10-04/B/p/EUR 10-04/a/p/EUR 10-04/a/p/USD 10-04/a/p/ 10-03/a/p/EUR"
	if got := ledgerPlaces(l.Rows); got != want || l.More {
		t.Fatalf("rows %q (more %v), want %q", got, l.More, want)
	}
	// The daily row and the suspects at its place are one row; the delivery flagged
	// twice is at risk once.
	r := l.Rows[1]
	if r.Caught.Minor != 400 || r.AtRisk().Count != 1 || r.AtRisk().Minor != 300 {
		t.Errorf("merged row: caught %+v, at risk %+v", r.Caught, r.AtRisk())
	}
	if got := ledgerPlaces(l.Totals); got != "01-01///EUR 01-01///" {
		t.Errorf("totals %q, want EUR then no currency", got)
	}
	if eur := l.Totals[0]; eur.Caught.Count != 4 || eur.Caught.Minor != 1300 || eur.MoneyMismatch.Minor != 200 {
		t.Errorf("EUR totals: caught %+v, mismatch %+v", eur.Caught, eur.MoneyMismatch)
	}

	l, read := build(2)
	if got := ledgerPlaces(l.Rows); got != "10-04/B/p/EUR 10-04/a/p/EUR" || !l.More {
		t.Errorf("limit 2: rows %q (more %v)", got, l.More)
	}
	if read != 2 {
		t.Errorf("limit 2: %d daily rows read, want 2 (the second shows the first row is complete)", read)
	}
	if eur := l.Totals[0]; eur.Caught.Count != 4 {
		t.Errorf("limit 2: EUR totals caught %+v, want every row counted", eur.Caught)
	}
}

// Money keeps apart what carried no amount at all, so that a count of such deliveries
// alone is never read as a sum of 0.00: through AddAmount, Add (one that overflows too:
// a sum no int64 holds loses the amounts, not the knowledge that some had none) and the
// money at risk, which takes a delivery flagged twice out once.
func TestMoneyNoAmount(t *testing.T) {
	const huge = "92233720368547758.07" // the largest int64 of cents
	var m storage.Money
	for _, a := range []string{"", "", "10.00", "12,50"} {
		m.AddAmount(a, "EUR")
	}
	if want := (storage.Money{Count: 4, Minor: 1000, Unsummed: 1, NoAmount: 2}); m != want {
		t.Fatalf("counted %+v, want %+v", m, want)
	}
	var none storage.Money
	none.AddAmount("", "EUR")
	if none != (storage.Money{Count: 1, NoAmount: 1}) {
		t.Fatalf("one without an amount: %+v", none)
	}
	sum := m
	sum.Add(none)
	if want := (storage.Money{Count: 5, Minor: 1000, Unsummed: 1, NoAmount: 3}); sum != want {
		t.Fatalf("added %+v, want %+v", sum, want)
	}
	var big storage.Money
	big.AddAmount(huge, "EUR")
	big.AddAmount("", "EUR")
	sum.Add(big)
	if want := (storage.Money{Count: 7, Minor: 1000, Unsummed: 2, NoAmount: 4}); sum != want {
		t.Fatalf("added past the int64: %+v, want %+v (the huge amount unsummed, none carried counted apart)", sum, want)
	}

	r := storage.LedgerRow{Currency: "EUR"}
	r.MoneyMismatch.AddAmount("", "EUR")
	r.BusinessKey.AddAmount("", "EUR")
	r.Correlation.AddAmount("", "EUR") // the same delivery as the business key's
	r.Overlap.AddAmount("", "EUR")
	r.LateDuplicate.AddAmount("5.00", "EUR")
	if risk, want := r.AtRisk(), (storage.Money{Count: 3, Minor: 500, NoAmount: 2}); risk != want {
		t.Fatalf("at risk %+v, want %+v", risk, want)
	}
}

// The builder counts duplicates and suspects without an amount as such, in the rows
// and the totals alike, and a delivery flagged twice once in the money at risk.
func TestLedgerBuilderNoAmount(t *testing.T) {
	k := storage.LedgerKey{Day: 20_000, Source: "ota", Property: "p", Currency: "EUR"}
	b := storage.NewLedgerBuilder(0)
	b.Duplicate(k, "", true)
	b.Suspect(k, storage.SuspectBusinessKey, storage.SuspectOpen, "", 9)
	b.Suspect(k, storage.SuspectCorrelation, storage.SuspectOpen, "", 9)
	b.Suspect(k, storage.SuspectLateDuplicate, storage.SuspectConfirmed, "", 10)
	b.Total("EUR", storage.LedgerMoneyMismatch, storage.Money{Count: 2, Minor: 300, NoAmount: 1})
	b.DayTotal(k, storage.LedgerMoneyMismatch, storage.Money{Count: 2, Minor: 300, NoAmount: 1})
	l := b.Result()
	if len(l.Rows) != 1 || len(l.Totals) != 1 {
		t.Fatalf("ledger %+v, want one row and one total", l)
	}
	for _, r := range []storage.LedgerRow{l.Rows[0], l.Totals[0]} {
		if r.Caught != (storage.Money{}) {
			t.Errorf("caught %+v: a duplicate without an amount is not money caught", r.Caught)
		}
		if want := (storage.Money{Count: 3, Minor: 300, NoAmount: 2}); r.MoneyMismatch != want {
			t.Errorf("money mismatches %+v, want %+v", r.MoneyMismatch, want)
		}
		if want := (storage.Money{Count: 4, Minor: 300, NoAmount: 3}); r.AtRisk() != want {
			t.Errorf("at risk %+v, want %+v", r.AtRisk(), want)
		}
		if want := (storage.Money{Count: 1, NoAmount: 1}); r.Confirmed != want {
			t.Errorf("confirmed %+v, want %+v", r.Confirmed, want)
		}
	}
}
