package enginetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestLedger checks the ledger's sums per currency against a hand count, before the
// roll-up (read from the deliveries), after it (from the daily totals) and half way.
func TestLedger(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db) // 2026-11-30 12:00 UTC
	rec := func(source, key, hash, property, amount, currency string) *storage.Delivery {
		t.Helper()
		d := delivery(source, key, hash)
		d.Property, d.Booking, d.EventStatus, d.Amount, d.Currency = property, "B-"+key, "cancelled", amount, currency
		return record(t, db, d, storage.ClaimOptions{TTL: 365 * 24 * time.Hour})
	}
	// Day 1 (2026-11-30), ota, P1.
	rec("ota", "a", "h", "P1", "100.10", "EUR")
	rec("ota", "a", "h", "P1", "100.10", "EUR") // caught EUR 100.10
	rec("ota", "a", "h", "P1", "0.05", "EUR")   // caught EUR 0.05
	rec("ota", "b", "h", "P1", "1200", "JPY")
	rec("ota", "b", "h", "P1", "1200", "JPY") // caught JPY 1200
	mm := rec("ota", "b", "h2", "P1", "1300", "JPY")
	e.SetMoneyMismatch(t, db, mm.ID) // caught JPY 1300, and a money mismatch of 1300
	rec("ota", "c", "h", "P1", "", "")
	rec("ota", "c", "h", "P1", "", "")          // a duplicate without an amount: not in the ledger
	rec("ota", "c", "h", "P1", "12.345", "EUR") // caught, but not summable: counted, unsummed
	// Day 1, ota, P2 and psp, P1.
	rec("ota", "d", "h", "P2", "1.5", "KWD")
	rec("ota", "d", "h", "P2", "1.5", "KWD") // caught KWD 1.500
	rec("psp", "a", "h", "P1", "50", "EUR")
	rec("psp", "a", "h", "P1", "50", "EUR") // caught EUR 50.00 (psp)
	// Day 2 (2026-12-01, after midnight UTC).
	c.Add(12*time.Hour + time.Second)
	rec("ota", "e", "h", "P1", "7.00", "EUR")
	rec("ota", "e", "h", "P1", "7.00", "EUR") // caught EUR 7.00 on day 2
	rec("ota", "f", "h", "P1", "3", "")
	rec("ota", "f", "h", "P1", "3", "") // caught, no currency: 3.00 kept apart
	// Suspects: open per kind, confirmed, dismissed (not in the ledger).
	day1 := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	for _, s := range []storage.Suspect{
		{Kind: storage.SuspectBusinessKey, Delivery: 1, Source: "ota", Property: "P1", Amount: "100.10", Currency: "EUR", FlaggedAt: day1},
		{Kind: storage.SuspectBusinessKey, Delivery: 2, Source: "ota", Property: "P1", Amount: "20", Currency: "EUR", FlaggedAt: day1},
		{Kind: storage.SuspectCorrelation, Delivery: 3, Source: "ota", Property: "P1", Amount: "500", Currency: "JPY", FlaggedAt: day1},
		{Kind: storage.SuspectLateDuplicate, Delivery: 4, Source: "ota", Property: "P1", Amount: "1.00", Currency: "EUR", FlaggedAt: day1},
		{Kind: storage.SuspectLateDuplicate, Delivery: 5, Source: "ota", Property: "P1", Amount: "9.99", Currency: "EUR", FlaggedAt: day1,
			State: storage.SuspectConfirmed},
		{Kind: storage.SuspectBusinessKey, Delivery: 6, Source: "ota", Property: "P1", Amount: "1000", Currency: "EUR", FlaggedAt: day1,
			State: storage.SuspectDismissed},
		{Kind: storage.SuspectCorrelation, Delivery: 7, Source: "psp", Property: "P9", Amount: "40", Currency: "USD", FlaggedAt: day1.Add(12 * time.Hour)},
	} {
		e.AddSuspect(t, db, s)
	}

	money := func(m storage.Money, cur string) string {
		s := fmt.Sprintf("%d/%s", m.Count, storage.FormatMinor(m.Minor, cur))
		if m.Unsummed > 0 {
			s += fmt.Sprintf("+%d?", m.Unsummed)
		}
		return s
	}
	show := func(f storage.LedgerFilter) string {
		t.Helper()
		l, err := db.Ledger(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		line := func(r storage.LedgerRow, head string) {
			fmt.Fprintf(&b, "%s %q caught=%s mm=%s bk=%s corr=%s late=%s confirmed=%s risk=%s\n", head, r.Currency,
				money(r.Caught, r.Currency), money(r.MoneyMismatch, r.Currency), money(r.BusinessKey, r.Currency),
				money(r.Correlation, r.Currency), money(r.LateDuplicate, r.Currency), money(r.Confirmed, r.Currency),
				money(r.AtRisk(), r.Currency))
		}
		for _, r := range l.Rows {
			line(r, r.Day.Format("01-02")+" "+r.Source+" "+r.Property)
		}
		for _, r := range l.Totals {
			line(r, "total")
		}
		return b.String()
	}
	// The hand count.
	const want = `12-01 ota P1 "EUR" caught=1/7.00 mm=0/0.00 bk=0/0.00 corr=0/0.00 late=0/0.00 confirmed=0/0.00 risk=0/0.00
12-01 ota P1 "" caught=1/3.00 mm=0/0.00 bk=0/0.00 corr=0/0.00 late=0/0.00 confirmed=0/0.00 risk=0/0.00
12-01 psp P9 "USD" caught=0/0.00 mm=0/0.00 bk=0/0.00 corr=1/40.00 late=0/0.00 confirmed=0/0.00 risk=1/40.00
11-30 ota P1 "EUR" caught=3/100.15+1? mm=0/0.00 bk=2/120.10 corr=0/0.00 late=1/1.00 confirmed=1/9.99 risk=3/121.10
11-30 ota P1 "JPY" caught=2/2500 mm=1/1300 bk=0/0 corr=1/500 late=0/0 confirmed=0/0 risk=2/1800
11-30 ota P2 "KWD" caught=1/1.500 mm=0/0.000 bk=0/0.000 corr=0/0.000 late=0/0.000 confirmed=0/0.000 risk=0/0.000
11-30 psp P1 "EUR" caught=1/50.00 mm=0/0.00 bk=0/0.00 corr=0/0.00 late=0/0.00 confirmed=0/0.00 risk=0/0.00
total "EUR" caught=5/157.15+1? mm=0/0.00 bk=2/120.10 corr=0/0.00 late=1/1.00 confirmed=1/9.99 risk=3/121.10
total "JPY" caught=2/2500 mm=1/1300 bk=0/0 corr=1/500 late=0/0 confirmed=0/0 risk=2/1800
total "KWD" caught=1/1.500 mm=0/0.000 bk=0/0.000 corr=0/0.000 late=0/0.000 confirmed=0/0.000 risk=0/0.000
total "USD" caught=0/0.00 mm=0/0.00 bk=0/0.00 corr=1/40.00 late=0/0.00 confirmed=0/0.00 risk=1/40.00
total "" caught=1/3.00 mm=0/0.00 bk=0/0.00 corr=0/0.00 late=0/0.00 confirmed=0/0.00 risk=0/0.00
`
	if got := show(storage.LedgerFilter{}); got != want {
		t.Fatalf("before the roll-up:\n%s\nwant:\n%s", got, want)
	}
	limited := func(limit int) string {
		t.Helper()
		l, err := db.Ledger(ctx, storage.LedgerFilter{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		all, err := db.Ledger(ctx, storage.LedgerFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(l.Rows) != fmt.Sprint(all.Rows[:min(limit, len(all.Rows))]) || fmt.Sprint(l.Totals) != fmt.Sprint(all.Totals) {
			t.Fatalf("limit %d: rows or totals differ from the first rows of all", limit)
		}
		return fmt.Sprintf("%d rows, more %v", len(l.Rows), l.More)
	}
	if got := limited(3); got != "3 rows, more true" {
		t.Fatalf("limit 3 before the roll-up: %s", got)
	}
	// Half folded: the totals and the tail add up to the same.
	if n, err := db.RollupLedger(ctx, 4); err != nil || n != 4 {
		t.Fatalf("roll-up of 4: %d, %v", n, err)
	}
	if got := show(storage.LedgerFilter{}); got != want {
		t.Fatalf("half rolled up:\n%s\nwant:\n%s", got, want)
	}
	if _, err := db.RollupStats(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RollupLedger(ctx, 1000); err != nil || n != 0 {
		t.Fatalf("roll-up after RollupStats: %d, %v; want it caught up", n, err)
	}
	if got := show(storage.LedgerFilter{}); got != want {
		t.Fatalf("rolled up:\n%s\nwant:\n%s", got, want)
	}

	t.Run("Limit", func(t *testing.T) {
		for limit, want := range map[int]string{2: "2 rows, more true", 6: "6 rows, more true", 7: "7 rows, more false", 9: "7 rows, more false"} {
			if got := limited(limit); got != want {
				t.Errorf("limit %d: %s, want %s", limit, got, want)
			}
		}
	})
	t.Run("Filters", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    storage.LedgerFilter
			want []string // the rows of want kept, by their first words
		}{
			{"Source", storage.LedgerFilter{Source: "psp"}, []string{"12-01 psp P9", "11-30 psp P1"}},
			{"Property", storage.LedgerFilter{Property: "P2"}, []string{"11-30 ota P2"}},
			{"Currency", storage.LedgerFilter{Currency: "JPY"}, []string{"11-30 ota P1 \"JPY\""}},
			{"Day", storage.LedgerFilter{From: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, []string{"12-01"}},
			{"BeforeDay", storage.LedgerFilter{To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, []string{"11-30"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := show(tc.f)
				var rows []string
				for line := range strings.SplitSeq(got, "\n") {
					if line != "" && !strings.HasPrefix(line, "total") {
						rows = append(rows, line)
					}
				}
				var wantRows []string
				for line := range strings.SplitSeq(want, "\n") {
					for _, p := range tc.want {
						if strings.HasPrefix(line, p) {
							wantRows = append(wantRows, line)
						}
					}
				}
				if strings.Join(rows, "\n") != strings.Join(wantRows, "\n") {
					t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
				}
			})
		}
	})
}

// TestRollupLedger_Concurrent: calls racing over the same duplicates count each of
// them once, as the hourly roll-up's do.
func TestRollupLedger_Concurrent(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	const keys = 60
	for i := range keys {
		for range 2 {
			d := delivery("ota", fmt.Sprint("k", i), "h")
			d.Amount, d.Currency = "0.01", "EUR"
			record(t, db, d, day)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				n, err := db.RollupLedger(ctx, 7)
				if err != nil {
					t.Error(err)
				}
				if n == 0 || err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if n, err := db.RollupLedger(ctx, 1000); err != nil || n != 0 {
		t.Fatalf("roll-up after the racing calls: %d, %v; want nothing left", n, err)
	}
	l, err := db.Ledger(ctx, storage.LedgerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Totals) != 1 || l.Totals[0].Caught != (storage.Money{Count: keys, Minor: keys}) {
		t.Fatalf("totals = %+v, want %d duplicates of 0.01 EUR", l.Totals, keys)
	}
}

// TestLedger_HugeAmounts: amounts whose sum passes what an int64 of minor units
// holds, sent by a sender (or read from a field that holds no amount), are counted as
// unsummed; the ledger stays readable, its day rows and its totals alike.
func TestLedger_HugeAmounts(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	const huge = "92233720368547758.07" // the largest int64 of cents
	dup := func(key, property string) {
		t.Helper()
		for range 2 {
			d := delivery("ota", key, "h")
			d.Property, d.Amount, d.Currency = property, huge, "EUR"
			record(t, db, d, storage.ClaimOptions{TTL: 365 * 24 * time.Hour})
		}
		// Each in its own roll-up: the daily totals add up what each roll-up summed.
		if _, err := db.RollupLedger(ctx, 1000); err != nil {
			t.Fatal(err)
		}
	}
	dup("a", "P1")
	dup("b", "P1") // one day row: its amount would pass the int64
	c.Add(24 * time.Hour)
	dup("c", "P2") // another day: the totals over days would pass it
	for _, f := range []storage.LedgerFilter{{}, {Property: "P1"}, {Source: "ota", Currency: "EUR"}} {
		l, err := db.Ledger(ctx, f)
		if err != nil {
			t.Fatalf("ledger %+v: %v", f, err)
		}
		var count int64
		for _, r := range l.Rows {
			count += r.Caught.Count
			if r.Caught.Count > 1 && r.Caught.Unsummed == 0 || r.Caught.Minor < 0 {
				t.Errorf("row %+v: a sum past the int64 is no sum", r.Caught)
			}
		}
		if len(l.Totals) != 1 || l.Totals[0].Caught.Count != count || l.Totals[0].Caught.Unsummed == 0 || l.Totals[0].Caught.Minor < 0 {
			t.Errorf("ledger %+v: totals %+v, want %d caught, some unsummed", f, l.Totals, count)
		}
	}
}

// TestLedger_OneDeliveryTwoFlags: a delivery flagged twice (a re-send under a new
// id that a correlation rule also finds through the payment provider) puts its money
// at risk once, not once per flag; each kind's column still lists it.
func TestLedger_OneDeliveryTwoFlags(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	corr := []storage.CorrelationKey{{Rule: "double-refund", Hash: "R", Window: time.Hour}}
	refund := func(source, key string) *storage.Delivery {
		d := bk(source, key, "B-"+source)
		d.Correlations = corr
		return record(t, db, d, opt)
	}
	refund("psp", "re_1")           // the payment provider's refund
	refund("ota", "evt_1")          // the OTA's: a suspected double of it
	again := refund("ota", "evt_2") // the OTA's again under a new id: flagged twice
	if len(again.Suspects) != 2 {
		t.Fatalf("re-send flagged %v, want business_key and correlation", again.Suspects)
	}
	l, err := db.Ledger(ctx, storage.LedgerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Rows) != 1 || len(l.Totals) != 1 {
		t.Fatalf("ledger = %+v, want the OTA's row and one total", l)
	}
	for _, r := range append(l.Rows, l.Totals...) {
		// Two deliveries of 80.00 EUR at risk: evt_1 (once) and evt_2 (once).
		if risk := r.AtRisk(); risk.Count != 2 || risk.Minor != 16000 {
			t.Errorf("%q at risk = %+v, want 2 deliveries, 160.00", r.Source, risk)
		}
		if r.BusinessKey.Count != 1 || r.Correlation.Count != 2 {
			t.Errorf("%q business key %+v, correlation %+v; want 1 and 2", r.Source, r.BusinessKey, r.Correlation)
		}
	}
	// Both its flags confirmed: one double, confirmed once.
	page, err := db.Suspects(ctx, storage.SuspectFilter{Delivery: again.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range page.Suspects {
		if x.Delivery == again.ID {
			if _, err := db.ReviewSuspect(ctx, x.ID, "ops", storage.SuspectConfirmed, "refunded twice"); err != nil {
				t.Fatal(err)
			}
		}
	}
	l, err = db.Ledger(ctx, storage.LedgerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(l.Rows, l.Totals...) {
		if r.Confirmed.Count != 1 || r.Confirmed.Minor != 8000 {
			t.Errorf("%q confirmed = %+v, want 1 delivery, 80.00", r.Source, r.Confirmed)
		}
		if risk := r.AtRisk(); risk.Count != 1 || risk.Minor != 8000 {
			t.Errorf("%q at risk = %+v, want evt_1 alone", r.Source, risk)
		}
	}
}
