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
