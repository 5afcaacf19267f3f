package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestLedger_AtRiskPastTheInt64: a delivery flagged twice is at risk once, its second
// flag taken away from the sum, but only from a sum that counted it: when a kind's sum
// passed the int64 and left that delivery's amount unsummed, taking it away again made
// the money at risk a sum of no delivery (here a negative one, of refunds all positive).
// The money at risk is each delivery once, summed exactly, or left unsummed.
func TestLedger_AtRiskPastTheInt64(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	const small, huge = "10000000000000000.00", "90000000000000000.00" // 1e18 and 9e18 cents
	a := recordEvent(t, db, "ota", "evt_a", "h", "P1", "B1", "cancelled", small)
	b := recordEvent(t, db, "ota", "evt_b", "h", "P1", "B2", "cancelled", huge)
	day1 := time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)
	for _, s := range []storage.Suspect{
		{Kind: storage.SuspectBusinessKey, Delivery: a.ID, Amount: small},
		{Kind: storage.SuspectBusinessKey, Delivery: b.ID, Amount: huge}, // past the int64 with a's
		{Kind: storage.SuspectCorrelation, Delivery: b.ID, Amount: huge}, // b again: at risk once
	} {
		s.Source, s.Property, s.Currency, s.FlaggedAt = "ota", "P1", "EUR", day1
		e.AddSuspect(t, db, s)
	}
	check := func(when string) {
		t.Helper()
		l, err := db.Ledger(ctx, storage.LedgerFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Rows) != 1 || len(l.Totals) != 1 {
			t.Fatalf("%s: ledger = %+v, want one row and one total", when, l)
		}
		for _, r := range append(l.Rows, l.Totals...) {
			// a and b: 1e19 cents together, which no int64 holds; the sum may keep
			// one of them and leave the other unsummed, but never pass for another.
			risk := r.AtRisk()
			kept := risk.Minor == 0 && risk.Unsummed == 2 || risk.Minor == 1e18 && risk.Unsummed == 1 ||
				risk.Minor == 9e18 && risk.Unsummed == 1
			if risk.Count != 2 || !kept {
				t.Errorf("%s: at risk %+v, want a and b, each summed or unsummed", when, risk)
			}
			flagged := r.Deliveries()
			kept = flagged.Minor == 0 && flagged.Unsummed == 2 || flagged.Minor == 1e18 && flagged.Unsummed == 1 ||
				flagged.Minor == 9e18 && flagged.Unsummed == 1
			if flagged.Count != 2 || !kept {
				t.Errorf("%s: deliveries at risk or confirmed %+v, want a and b, each summed or unsummed", when, flagged)
			}
		}
	}
	check("before the roll-up")
	rollUpAll(t, db)
	check("rolled up")
}
