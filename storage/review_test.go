package storage_test

import (
	"testing"

	"github.com/hookdedup/hookdedup/storage"
)

// TestSuspectTotal: amounts added and taken away again leave the total exactly as it
// was, through a sum that no int64 holds on the way (then every suspect that carried an
// amount counts as unsummed), negative amounts (by their magnitude), amounts that are no
// exact number of minor units and none at all.
func TestSuspectTotal(t *testing.T) {
	const huge = "92233720368547758.07" // the largest int64 of cents
	var tot storage.SuspectTotal
	for _, a := range []string{"100.10", "-0.05", "12.345", "n/a", ""} {
		tot.AddAmount(a, "EUR", 1)
	}
	want := storage.Money{Count: 5, Minor: 10015, Unsummed: 2, NoAmount: 1}
	if got := tot.Money(); got != want {
		t.Fatalf("money = %+v, want %+v", got, want)
	}
	tot.AddAmount(huge, "EUR", 1)
	if got := tot.Money(); got != (storage.Money{Count: 6, Minor: 0, Unsummed: 5, NoAmount: 1}) {
		t.Fatalf("past the int64: %+v, want every suspect with an amount unsummed", got)
	}
	tot.AddAmount(huge, "EUR", 1)
	tot.AddAmount(huge, "EUR", -1)
	tot.AddAmount(huge, "EUR", -1)
	tot.AddAmount("12.345", "EUR", -1)
	if got, want := tot.Money(), (storage.Money{Count: 4, Minor: 10015, Unsummed: 1, NoAmount: 1}); got != want {
		t.Fatalf("taken away again: %+v, want %+v", got, want)
	}
	var big storage.SuspectTotal
	big.AddAmount(huge, "EUR", 1)
	big.AddAmount("-"+huge, "EUR", 1)
	big.AddAmount("-"+huge, "EUR", -1)
	if got := big.Money(); got != (storage.Money{Count: 1, Minor: 9223372036854775807}) {
		t.Fatalf("a negative huge amount past the int64 and taken away again: %+v", got)
	}
	var sum storage.SuspectTotal
	sum.Add(tot)
	sum.Add(big)
	if got := sum.Money(); got.Count != 5 || got.Unsummed != 4 || got.NoAmount != 1 {
		t.Fatalf("sum past the int64: %+v, want every suspect with an amount unsummed", got)
	}
}
