package receiver_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// An amount in minor units written with an exponent ("1.825e4" cents) is 182.50, as a
// correlation rule reads it: stored in major units like 18250 cents, summed by the
// ledger, and the same money as 18250 when a redelivery spells it so. Kept as sent, it
// was 18,250 euros to a reader and a money mismatch with its own first delivery.
func TestHandler_MinorUnitsWithExponent(t *testing.T) {
	ctx := context.Background()
	psp := otaSource(t)
	psp.Name = "psp"
	psp.AmountField, psp.CurrencyField, psp.AmountMinorUnits = []string{"/amount"}, "/currency", true
	e := newEnv(t, sqlite.Options{}, psp)
	post := func(id, amount, want string) int64 {
		t.Helper()
		code, a, _ := e.post(t, "psp", id, `{"booking_id":"B","amount":`+amount+`,"currency":"eur"}`, nil)
		if code != http.StatusOK || a.Status != want {
			t.Fatalf("%s %s: %d %+v, want 200 %s", id, amount, code, a, want)
		}
		n, _ := strconv.ParseInt(a.Delivery, 10, 64)
		return n
	}
	for _, tc := range []struct{ name, first, again, stored string }{
		{"JSONNumber", `18250`, `1.825e4`, "182.50"},
		{"Text", `"1.825E+4"`, `18250`, "182.50"},
		{"SmallExponent", `"1825e1"`, `"18250"`, "182.50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := post("evt_"+tc.name, tc.first, "accepted")
			again := post("evt_"+tc.name, tc.again, "duplicate")
			for _, id := range []int64{first, again} {
				d, err := e.db.Delivery(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if d.Amount != tc.stored || d.Currency != "EUR" {
					t.Errorf("delivery %d: amount %q %q, want %q EUR", id, d.Amount, d.Currency, tc.stored)
				}
			}
			if f, err := e.db.FlagsOf(ctx, again); err != nil || f.MoneyMismatch {
				t.Errorf("the redelivery spelling the amount otherwise: money mismatch %v, %v; want none", f.MoneyMismatch, err)
			}
		})
	}
}
