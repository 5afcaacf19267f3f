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

// One delivery that two correlation rules flag (an OTA's refund doubled by the payment
// provider's and by the bank's) is one delivery in its kind's cell, its money counted
// once, as the cell's link lists it once and at risk counts it.
func TestLedger_OneDeliveryTwoRulesOfAKind(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}
	psp := storage.CorrelationKey{Rule: "double-refund", Hash: "R", Window: time.Hour}
	bank := storage.CorrelationKey{Rule: "bank-refund", Hash: "S", Window: time.Hour}
	refund := func(source, key string, corr ...storage.CorrelationKey) *storage.Delivery {
		d := bk(source, key, "B-"+source)
		d.Correlations = corr
		return record(t, db, d, opt)
	}
	refund("psp", "re_1", psp)
	refund("bank", "tx_1", bank)
	ota := refund("ota", "evt_1", psp, bank)
	if len(ota.Suspects) != 2 {
		t.Fatalf("the OTA's refund flagged %v, want one correlation per rule", ota.Suspects)
	}
	l, err := db.Ledger(ctx, storage.LedgerFilter{Source: "ota"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Rows) != 1 || len(l.Totals) != 1 {
		t.Fatalf("ledger = %+v, want the OTA's row and one total", l)
	}
	for _, r := range append(l.Rows, l.Totals...) {
		if r.Correlation.Count != 1 || r.Correlation.Minor != 8000 {
			t.Errorf("%q correlation %+v, want 1 delivery, 80.00", r.Source, r.Correlation)
		}
		if risk := r.AtRisk(); risk.Count != 1 || risk.Minor != 8000 {
			t.Errorf("%q at risk = %+v, want 1 delivery, 80.00", r.Source, risk)
		}
	}
}

// noAmountMoney writes m as count/sum, then +N? for the amounts left out of the sum
// and ~N for the deliveries or suspects that carried no amount at all.
func noAmountMoney(m storage.Money, cur string) string {
	s := fmt.Sprintf("%d/%s", m.Count, storage.FormatMinor(m.Minor, cur))
	if m.Unsummed != 0 {
		s += fmt.Sprintf("+%d?", m.Unsummed)
	}
	if m.NoAmount != 0 {
		s += fmt.Sprintf("~%d", m.NoAmount)
	}
	return s
}

// noAmountLedger writes the ledger of f on db, a line a row (day and property) and a
// line a currency's totals, each kind's money as noAmountMoney writes it.
func noAmountLedger(t *testing.T, db storage.Store, f storage.LedgerFilter) string {
	t.Helper()
	l, err := db.Ledger(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var w strings.Builder
	line := func(r storage.LedgerRow, head string) {
		fmt.Fprintf(&w, "%s caught=%s mm=%s bk=%s corr=%s late=%s confirmed=%s risk=%s\n", head,
			noAmountMoney(r.Caught, r.Currency), noAmountMoney(r.MoneyMismatch, r.Currency),
			noAmountMoney(r.BusinessKey, r.Currency), noAmountMoney(r.Correlation, r.Currency),
			noAmountMoney(r.LateDuplicate, r.Currency), noAmountMoney(r.Confirmed, r.Currency),
			noAmountMoney(r.AtRisk(), r.Currency))
	}
	for _, r := range l.Rows {
		line(r, r.Day.Format("01-02")+" "+r.Property)
	}
	for _, r := range l.Totals {
		line(r, "total "+r.Currency)
	}
	return w.String()
}

// recordMoneyMismatch records, on db, a delivery of key to property carrying first (""
// for no amount) and a duplicate of it carrying again, both in EUR, whose status
// differs too: intake flags it a money mismatch, whether or not either carried an
// amount. It returns the first, the one accepted and handed downstream.
func recordMoneyMismatch(t *testing.T, db storage.Store, key, property, first, again string) *storage.Delivery {
	t.Helper()
	rec := func(hash, status, amount string) *storage.Delivery {
		t.Helper()
		d := delivery("ota", key, hash)
		d.Property, d.Booking, d.EventStatus, d.Amount, d.Currency = property, "B-"+key, status, amount, "EUR"
		return record(t, db, d, storage.ClaimOptions{TTL: time.Hour})
	}
	d := rec("h", "cancelled", first)
	if dup := rec("h2", "refunded", again); dup.Outcome != storage.Duplicate || !dup.MoneyMismatch {
		t.Fatalf("%s again: %s, money mismatch %v; want a money mismatch", key, dup.Outcome, dup.MoneyMismatch)
	}
	return d
}

// rollUpAll rolls up db's ledger and suspects' totals until nothing is left to fold.
func rollUpAll(t *testing.T, db storage.Store) {
	t.Helper()
	ctx := context.Background()
	for range 100 {
		n, err := db.RollupLedger(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		ns, err := db.RollupSuspects(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && ns == 0 {
			return
		}
	}
	t.Fatal("the roll-ups did not catch up")
}

// TestLedger_NoAmount: money mismatches and suspects whose delivery states a currency
// but carries no amount are counted as such, apart from the sum, in the rows and the
// totals alike, before the roll-up, half way, after it, on another handle and filtered
// by property (the daily rows of each property summed rather than their totals): a
// row of them alone must not read as money of 0.00.
func TestLedger_NoAmount(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	recordMoneyMismatch(t, db, "a", "P1", "80.00", "") // the amount left out of the redelivery
	b := recordMoneyMismatch(t, db, "b", "P1", "", "")
	recordMoneyMismatch(t, db, "c", "P1", "10.00", "12.00") // caught 12.00, and a money mismatch of it
	for range 2 {
		d := delivery("ota", "d", "h")
		d.Property, d.Currency = "P1", "EUR"
		record(t, db, d, day) // the duplicate is neither caught nor at risk
	}
	p2 := recordMoneyMismatch(t, db, "e", "P2", "", "")
	day1 := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	for _, s := range []storage.Suspect{
		{Kind: storage.SuspectBusinessKey, Delivery: b.ID, Property: "P1"},
		{Kind: storage.SuspectCorrelation, Delivery: b.ID, Property: "P1"}, // b's money at risk once
		{Kind: storage.SuspectLateDuplicate, Delivery: b.ID + 100, Property: "P1", State: storage.SuspectConfirmed},
		{Kind: storage.SuspectLateDuplicate, Delivery: p2.ID, Property: "P2"},
		{Kind: storage.SuspectLateDuplicate, Delivery: p2.ID + 100, Property: "P2", Amount: "5.00", State: storage.SuspectDismissed},
	} {
		s.Source, s.Currency, s.FlaggedAt = "ota", "EUR", day1
		e.AddSuspect(t, db, s)
	}
	const want = `11-30 P1 caught=1/12.00 mm=3/12.00~2 bk=1/0.00~1 corr=1/0.00~1 late=0/0.00 confirmed=1/0.00~1 risk=4/12.00~3
11-30 P2 caught=0/0.00 mm=1/0.00~1 bk=0/0.00 corr=0/0.00 late=1/0.00~1 confirmed=0/0.00 risk=2/0.00~2
total EUR caught=1/12.00 mm=4/12.00~3 bk=1/0.00~1 corr=1/0.00~1 late=1/0.00~1 confirmed=1/0.00~1 risk=6/12.00~5
`
	const wantP2 = `11-30 P2 caught=0/0.00 mm=1/0.00~1 bk=0/0.00 corr=0/0.00 late=1/0.00~1 confirmed=0/0.00 risk=2/0.00~2
total EUR caught=0/0.00 mm=1/0.00~1 bk=0/0.00 corr=0/0.00 late=1/0.00~1 confirmed=0/0.00 risk=2/0.00~2
`
	check := func(db storage.Store, when string) {
		t.Helper()
		if got := noAmountLedger(t, db, storage.LedgerFilter{}); got != want {
			t.Errorf("%s:\n%swant:\n%s", when, got, want)
		}
		if got := noAmountLedger(t, db, storage.LedgerFilter{Property: "P2"}); got != wantP2 {
			t.Errorf("%s, P2 alone:\n%swant:\n%s", when, got, wantP2)
		}
	}
	check(db, "before the roll-up")
	if n, err := db.RollupLedger(ctx, 2); err != nil || n != 2 {
		t.Fatalf("roll-up of 2: %d, %v", n, err)
	}
	check(db, "half rolled up")
	rollUpAll(t, db)
	check(db, "rolled up")
	check(e.Reopen(t, db), "rolled up, another handle")
}

// TestLedger_NoAmountPastTheInt64: a sum of money mismatches that no int64 of minor
// units holds, in a daily total and over days, counts the deliveries that carried an
// amount as unsummed, and those that carried none still as such: none of their money
// was lost with the sum, it was never known.
func TestLedger_NoAmountPastTheInt64(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	const huge = "92233720368547758.07" // the largest int64 of cents
	rollUp := func() {
		t.Helper()
		if _, err := db.RollupLedger(ctx, 1000); err != nil {
			t.Fatal(err)
		}
	}
	recordMoneyMismatch(t, db, "a", "P1", "1.00", huge)
	rollUp()
	recordMoneyMismatch(t, db, "b", "P1", "1.00", huge)
	recordMoneyMismatch(t, db, "c", "P1", "1.00", "") // folded with b, whose amount passes the int64 in the daily total
	rollUp()
	c.Add(24 * time.Hour)
	recordMoneyMismatch(t, db, "d", "P1", "1.00", "5.00")
	recordMoneyMismatch(t, db, "e", "P1", "1.00", "")
	rollUp()
	l, err := db.Ledger(ctx, storage.LedgerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Rows) != 2 || len(l.Totals) != 1 {
		t.Fatalf("ledger %+v, want two days and one total", l)
	}
	if got := l.Rows[0].MoneyMismatch; got != (storage.Money{Count: 2, Minor: 500, NoAmount: 1}) {
		t.Errorf("day 2: %+v, want 5.00 and one without an amount", got)
	}
	if got := l.Rows[1].MoneyMismatch; got.Count != 3 || got.Unsummed != 1 || got.NoAmount != 1 {
		t.Errorf("day 1: %+v, want 3 with b's amount unsummed and c's none counted as such", got)
	}
	if got := l.Totals[0].MoneyMismatch; got.Count != 5 || got.Unsummed != 3 || got.NoAmount != 2 {
		t.Errorf("totals: %+v, want 5, the 3 with an amount unsummed, 2 without one", got)
	}
}

// NoAmountUpgrade is the upgrade to totals that count the deliveries and suspects that
// carried no amount, on a database whose ledger and suspects were rolled up by the
// version before, and some of whose deliveries retention swept: downgrade closes db,
// puts its database back to that version's schema, and returns a handle this version
// opened on it (so migrated it). The money mismatches and suspects already folded are
// counted again, exactly, those after the marks too, and the days retention swept keep
// their counts and sums: only whether their money mismatches carried an amount is lost
// with the deliveries.
func NoAmountUpgrade(t *testing.T, e Engine, downgrade func(t *testing.T, db storage.Store) storage.Store) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db) // 2026-11-30 12:00 UTC
	// Day 1: swept by retention before the upgrade.
	recordMoneyMismatch(t, db, "old-none", "P1", "1.00", "")
	recordMoneyMismatch(t, db, "old-paid", "P1", "10.00", "12.00")
	rollUpAll(t, db)
	clk.Add(48 * time.Hour)
	none := recordMoneyMismatch(t, db, "none", "P1", "", "")
	paid := recordMoneyMismatch(t, db, "paid", "P1", "4.00", "5.00")
	p2 := recordMoneyMismatch(t, db, "none-p2", "P2", "", "")
	suspect := func(kind storage.SuspectKind, d *storage.Delivery) storage.Suspect {
		t.Helper()
		return e.AddSuspect(t, db, storage.Suspect{Kind: kind, Delivery: d.ID, Source: d.Source, Property: d.Property,
			Amount: d.Amount, Currency: d.Currency, FlaggedAt: clk.Now()})
	}
	suspect(storage.SuspectBusinessKey, p2)
	suspect(storage.SuspectCorrelation, paid)
	late := suspect(storage.SuspectLateDuplicate, none)
	rollUpAll(t, db)
	if _, err := db.ReviewSuspect(ctx, late.ID, "olga", storage.SuspectConfirmed, "refunded twice"); err != nil {
		t.Fatal(err)
	}
	// After the marks: read as they are, before the upgrade and after it.
	suspect(storage.SuspectBusinessKey, recordMoneyMismatch(t, db, "tail", "P1", "", ""))
	if n := sweepAll(t, db, clk.Now().Add(-24*time.Hour), 100); n != 4 {
		t.Fatalf("retention swept %d deliveries, want day 1's 4", n)
	}

	const counts = `business_key open "EUR" n=2 minor=0 unsummed=0 no_amount=2
correlation open "EUR" n=1 minor=400 unsummed=0
late_duplicate confirmed "EUR" n=1 minor=0 unsummed=0 no_amount=1
`
	check := func(db storage.Store, when, ledger string) {
		t.Helper()
		if got := noAmountLedger(t, db, storage.LedgerFilter{}); got != ledger {
			t.Errorf("%s: ledger:\n%swant:\n%s", when, got, ledger)
		}
		cs, err := db.SuspectCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := formatSuspectCounts(cs); got != counts {
			t.Errorf("%s: suspect counts:\n%swant:\n%s", when, got, counts)
		}
	}
	check(db, "before the upgrade", `12-02 P1 caught=1/5.00 mm=3/5.00~2 bk=1/0.00~1 corr=1/4.00 late=0/0.00 confirmed=1/0.00~1 risk=5/9.00~3
12-02 P2 caught=0/0.00 mm=1/0.00~1 bk=1/0.00~1 corr=0/0.00 late=0/0.00 confirmed=0/0.00 risk=2/0.00~2
11-30 P1 caught=1/12.00 mm=2/12.00~1 bk=0/0.00 corr=0/0.00 late=0/0.00 confirmed=0/0.00 risk=2/12.00~1
total EUR caught=2/17.00 mm=6/17.00~4 bk=2/0.00~2 corr=1/4.00 late=0/0.00 confirmed=1/0.00~1 risk=9/21.00~6
`)

	db = downgrade(t, db)
	e.SetClock(db, clk.Now)
	// Day 1's money mismatch without an amount is in its count still, no longer told
	// apart: its delivery is gone.
	const upgraded = `12-02 P1 caught=1/5.00 mm=3/5.00~2 bk=1/0.00~1 corr=1/4.00 late=0/0.00 confirmed=1/0.00~1 risk=5/9.00~3
12-02 P2 caught=0/0.00 mm=1/0.00~1 bk=1/0.00~1 corr=0/0.00 late=0/0.00 confirmed=0/0.00 risk=2/0.00~2
11-30 P1 caught=1/12.00 mm=2/12.00 bk=0/0.00 corr=0/0.00 late=0/0.00 confirmed=0/0.00 risk=2/12.00
total EUR caught=2/17.00 mm=6/17.00~3 bk=2/0.00~2 corr=1/4.00 late=0/0.00 confirmed=1/0.00~1 risk=9/21.00~5
`
	check(db, "upgraded", upgraded)
	rollUpAll(t, db)
	check(db, "upgraded and rolled up", upgraded)
	check(e.Reopen(t, db), "upgraded, another handle", upgraded)
}
