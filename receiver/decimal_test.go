package receiver

import (
	"strings"
	"testing"
)

// TestDecimalText: amounts spelt with an exponent are read as the numbers they are,
// within what an amount can be; an exponent beyond that is no amount to compare. A
// sender's (or a pasted payload's) "1e999999" would otherwise cost seconds of CPU and
// a megabyte of digits for each event a correlation rule reads.
func TestDecimalText(t *testing.T) {
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
		{"abc", "", false},
		{"1e999999", "", false},
		{"1E-999999", "", false},
		{"0x1p999999", "", false},
		{strings.Repeat("9", 100000) + "/3", "", false},
	} {
		got, ok := decimalText(tc.in)
		if ok != tc.ok || got != tc.want {
			short := got
			if len(short) > 40 {
				short = short[:40] + "…"
			}
			t.Errorf("decimalText(%.40q) = %q, %v; want %q, %v", tc.in, short, ok, tc.want, tc.ok)
		}
	}
}
