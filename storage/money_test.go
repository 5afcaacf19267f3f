package storage_test

import (
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

func TestCurrencyExponent(t *testing.T) {
	for code, want := range map[string]int{
		"EUR": 2, "usd": 2, "": 2, "XYZ": 2, "JPY": 0, "jpy": 0, "KRW": 0,
		"KWD": 3, "BHD": 3, "OMR": 3, "JOD": 3, "TND": 3, "IQD": 3, "LYD": 3, "CLF": 4,
	} {
		if got := storage.CurrencyExponent(code); got != want {
			t.Errorf("CurrencyExponent(%q) = %d, want %d", code, got, want)
		}
	}
}

func TestMajorUnits(t *testing.T) {
	for _, c := range []struct {
		amount, currency, want string
		ok                     bool
	}{
		{"41250", "EUR", "412.50", true},
		{"18250", "eur", "182.50", true},
		{"5", "USD", "0.05", true},
		{"0", "USD", "0.00", true},
		{"-1999", "USD", "-19.99", true},
		{"-0", "USD", "0.00", true},
		{"18000", "JPY", "18000", true},
		{"1250", "KWD", "1.250", true},
		{"7", "KWD", "0.007", true},
		{"12345", "CLF", "1.2345", true},
		{"0041250", "EUR", "412.50", true},
		{"12.5", "EUR", "0.125", true},                                       // a fraction of a cent is moved too, not dropped
		{"100", "", "1.00", true},                                            // no currency: two places
		{"1e+21", "EUR", "10000000000000000000.00", true},                    // an exponent: read as the number it is
		{"1.825E4", "EUR", "182.50", true},                                   //
		{"-1825e1", "EUR", "-182.50", true},                                  //
		{"1e+41", "EUR", "1e+41", false},                                     // past MaxNumberExp: kept as sent
		{"36500/2", "EUR", "36500/2", false},                                 // a fraction: kept as sent
		{"12,50", "EUR", "12,50", false},                                     // likewise
		{"", "EUR", "", false},                                               //
		{"-", "EUR", "-", false},                                             //
		{"1.", "EUR", "1.", false},                                           //
		{"99999999999999999999999", "EUR", "999999999999999999999.99", true}, // past float64, exact
	} {
		got, ok := storage.MajorUnits(c.amount, c.currency, nil)
		if got != c.want || ok != c.ok {
			t.Errorf("MajorUnits(%q, %q) = %q, %v; want %q, %v", c.amount, c.currency, got, ok, c.want, c.ok)
		}
	}
	// A sender's own exponents (Adyen's) win over ISO 4217's, in any case of the code.
	adyen := map[string]int{"CLP": 2, "ISK": 2, "CVE": 0}
	for _, c := range []struct{ amount, currency, want string }{
		{"10000", "CLP", "100.00"}, {"279000", "isk", "2790.00"}, {"500", "CVE", "500"}, {"1250", "EUR", "12.50"}, {"18000", "JPY", "18000"},
	} {
		if got, ok := storage.MajorUnits(c.amount, c.currency, adyen); got != c.want || !ok {
			t.Errorf("MajorUnits(%q, %q, Adyen's) = %q, %v; want %q", c.amount, c.currency, got, ok, c.want)
		}
	}
}

func TestCurrencyCode(t *testing.T) {
	for in, want := range map[string]string{"eur": "EUR", " usd ": "USD", "": "", "a-very-long-currency-name": "A-VERY-LONG-CURR"} {
		if got := storage.CurrencyCode(in); got != want {
			t.Errorf("CurrencyCode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMinorUnits(t *testing.T) {
	for _, tc := range []struct {
		amount, currency string
		want             int64
		ok               bool
	}{
		{"412.50", "EUR", 41250, true},
		{"412.5", "EUR", 41250, true},
		{"412", "EUR", 41200, true},
		{"0.01", "usd", 1, true},
		{"-12.30", "EUR", -1230, true},
		{"0", "EUR", 0, true},
		{"000.00", "EUR", 0, true},
		{"1200", "JPY", 1200, true},
		{"1200.0", "JPY", 1200, true},
		{"1200.5", "JPY", 0, false}, // half a yen is no amount
		{"1.5", "KWD", 1500, true},
		{"0.001", "KWD", 1, true},
		{"10.005", "EUR", 0, false},
		{"1e3", "EUR", 0, false},
		{"", "EUR", 0, false},
		{"12.", "EUR", 0, false},
		{".5", "EUR", 0, false},
		{"99999999999999999999", "EUR", 0, false},
	} {
		got, ok := storage.MinorUnits(tc.amount, tc.currency)
		if got != tc.want || ok != tc.ok {
			t.Errorf("MinorUnits(%q, %q) = %d, %v; want %d, %v", tc.amount, tc.currency, got, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{41250, "EUR", "412.50"}, {5, "EUR", "0.05"}, {-5, "EUR", "-0.05"}, {0, "EUR", "0.00"},
		{1200, "JPY", "1200"}, {1500, "KWD", "1.500"}, {-123456, "", "-1234.56"},
	} {
		if got := storage.FormatMinor(tc.minor, tc.currency); got != tc.want {
			t.Errorf("FormatMinor(%d, %q) = %q, want %q", tc.minor, tc.currency, got, tc.want)
		}
	}
}

// TestNumberText: amounts spelt with an exponent are read as the numbers they are,
// within what an amount can be; an exponent beyond that is no amount to compare. A
// sender's (or a pasted payload's) "1e999999" would otherwise cost seconds of CPU and
// a megabyte of digits for each event a correlation rule reads.
func TestNumberText(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"182.50", "182.5", true},
		{"-0120.50", "-120.5", true},
		{"1.825e2", "182.5", true},
		{"18250E-2", "182.5", true},
		{".5", "0.5", true},
		{"1/3", "1/3", true},
		{"1e-31", "0.0000000000000000000000000000001", true},
		{"1.5e-40", "0.00000000000000000000000000000000000000015", true},
		{"1.0000000000000000000000000000001e0", "1.0000000000000000000000000000001", true},
		{"abc", "", false},
		{"1e999999", "", false},
		{"1E-999999", "", false},
		{"0x1p999999", "", false},
		{strings.Repeat("9", 100000) + "/3", "", false},
	} {
		got, ok := storage.NumberText(tc.in)
		if ok != tc.ok || got != tc.want {
			short := got
			if len(short) > 40 {
				short = short[:40] + "…"
			}
			t.Errorf("NumberText(%.40q) = %q, %v; want %q, %v", tc.in, short, ok, tc.want, tc.ok)
		}
	}
}

// TestSameAmount_DecimalsPastThirty: an amount spelt with an exponent compares as the
// decimal it is to its plain spelling, however many places it has within an amount's
// bounds, as PostgreSQL's numeric compares them: the two engines flag the same money
// mismatches.
func TestSameAmount_DecimalsPastThirty(t *testing.T) {
	for _, c := range [][2]string{
		{"1e-31", "0.0000000000000000000000000000001"},
		{"1.0000000000000000000000000000001e0", "1.0000000000000000000000000000001"},
		{"1.5e-40", "0.00000000000000000000000000000000000000015"},
	} {
		if !storage.SameAmount(c[0], c[1]) {
			t.Errorf("SameAmount(%q, %q) = false; want the same amount", c[0], c[1])
		}
	}
	if storage.SameAmount("1e-31", "0.0000000000000000000000000000002") {
		t.Error("SameAmount(1e-31, 2e-31) = true")
	}
}

// TestMoneyTerms_Same: the money mismatch rule, as intake, the key lab and the
// comparison of two deliveries ask it: one amount spelt two ways is the same money; a
// different amount, currency or status is not.
func TestMoneyTerms_Same(t *testing.T) {
	first := storage.Delivery{Amount: "182.50", Currency: "EUR", EventStatus: "cancelled"}
	for _, c := range []struct {
		p    storage.Probe
		same bool
	}{
		{storage.Probe{Amount: "182.50", Currency: "EUR", EventStatus: "cancelled"}, true},
		{storage.Probe{Amount: "182.5", Currency: "EUR", EventStatus: "cancelled"}, true},
		{storage.Probe{Amount: "1.825e2", Currency: "EUR", EventStatus: "cancelled"}, true},
		{storage.Probe{Amount: "182.51", Currency: "EUR", EventStatus: "cancelled"}, false},
		{storage.Probe{Amount: "182.50", Currency: "USD", EventStatus: "cancelled"}, false},
		{storage.Probe{Amount: "182.50", Currency: "EUR", EventStatus: "refunded"}, false},
		{storage.Probe{Amount: "", Currency: "EUR", EventStatus: "cancelled"}, false},
	} {
		if got := first.MoneyTerms().Same(c.p.MoneyTerms()); got != c.same {
			t.Errorf("%+v against %+v: Same = %v, want %v", first.MoneyTerms(), c.p.MoneyTerms(), got, c.same)
		}
		if got := c.p.MoneyTerms().Same(first.MoneyTerms()); got != c.same {
			t.Errorf("%+v against %+v: Same = %v, want %v", c.p.MoneyTerms(), first.MoneyTerms(), got, c.same)
		}
	}
}
