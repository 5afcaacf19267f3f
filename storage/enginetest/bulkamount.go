package enginetest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestBulkFilter_AmountMagnitude checks that a bulk filter's amount range bounds each
// amount's magnitude, as the approval thresholds and the ledger count it: sources write a
// refund as "-5000.00" or as "5000.00", and "refunds up to 100" must leave out the
// refund of 5000 either way. Amounts are stored in major units whatever the source
// sent (a source in minor units is converted at intake), so the bounds are in major
// units too, compared exactly: "-100.00" is within an amount_max of "100".
func TestBulkFilter_AmountMagnitude(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	for _, d := range []struct{ key, amount, currency string }{
		{"neg5000", "-5000.00", "EUR"},
		{"pos5000", "5000", "EUR"},
		{"neg250", "-250.00", "EUR"},
		{"pos250", "250", "EUR"},
		{"neg100.01", "-100.01", "EUR"},
		{"pos100.01", "100.01", "EUR"},
		{"neg100", "-100.00", "EUR"},
		{"pos100", "100", "EUR"},
		{"neg99.99", "-99.99", "EUR"},
		{"pos99.99", "99.99", "EUR"},
		{"neg0.50", "-0.50", "EUR"},
		{"kwd-100.001", "-100.001", "KWD"},
		{"jpy-101", "-101", "JPY"},
		{"comma", "-50,00", "EUR"},
		{"none", "", ""},
	} {
		record(t, db, moneyDelivery("ota", d.key, d.amount, d.currency, "p1"), day)
	}
	for _, tt := range []struct {
		name     string
		min, max string
		want     []string
	}{
		{"AtMost", "", "100",
			[]string{"neg0.50", "neg100", "neg99.99", "pos100", "pos99.99"}},
		{"AtLeast", "100", "",
			[]string{"jpy-101", "kwd-100.001", "neg100", "neg100.01", "neg250", "neg5000", "pos100", "pos100.01", "pos250", "pos5000"}},
		{"Between", "100.00", "250",
			[]string{"jpy-101", "kwd-100.001", "neg100", "neg100.01", "neg250", "pos100", "pos100.01", "pos250"}},
		{"ExactlyOne", "100.01", "100.010",
			[]string{"neg100.01", "pos100.01"}},
		{"FromZero", "0", "0.5",
			[]string{"neg0.50"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Reason: "refunds",
				Actor: "ann", Filter: storage.BulkFilter{Source: "ota", AmountMin: tt.min, AmountMax: tt.max}})
			if err != nil {
				t.Fatal(err)
			}
			keys, err := db.BulkKeys(ctx, a.ID, 1000)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range keys {
				got = append(got, k.Key)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) || a.Total != len(tt.want) {
				t.Errorf("amount from %q to %q: %d keys %v; want %v", tt.min, tt.max, a.Total, got, tt.want)
			}
		})
	}
	t.Run("SignedBoundRefused", func(t *testing.T) {
		for _, f := range []storage.BulkFilter{{AmountMin: "-100"}, {AmountMax: "-100"}, {AmountMin: "-5", AmountMax: "5"}} {
			_, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Reason: "refunds",
				Actor: "ann", Filter: f})
			name := "amount_min"
			if f.AmountMin == "" {
				name = "amount_max"
			}
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "without their sign") {
				t.Errorf("%+v: %v; want an error naming %s and saying amounts compare without their sign", f, err, name)
			}
		}
	})
}
