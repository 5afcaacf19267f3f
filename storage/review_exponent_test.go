package storage_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestSuspectTotals_CurrencyTableChanged: the running totals keep each folded amount
// in minor units as the currency table of the release that folded it read them, and a
// review takes an amount out as the running release reads it. The table is code (ISO
// 4217 amendments; a currency such as HUF that providers send without decimals): once
// a release changes a currency's decimals, the folded suspects keep the old reading
// for good, and a review then takes out what was never put in, leaving a negative
// count of unsummed amounts. Before the totals every reading used the running table.
// Here two HUF suspects of "1.50" are folded with two decimals (150 each); the next
// release gives HUF none, so "1.50" is no whole number of minor units (unsummed); one
// is dismissed. The counts should be what the suspects make under that release.
func TestSuspectTotals_CurrencyTableChanged(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	path := db.Path()
	var ids []int64
	for i := range 2 {
		s := storagetest.AddSuspect(t, db, storage.Suspect{Kind: storage.SuspectBusinessKey, Delivery: int64(i + 1),
			Source: "ota", Amount: "1.50", Currency: "HUF"})
		ids = append(ids, s.ID)
	}
	if n, err := db.RollupSuspects(ctx, 100); err != nil || n != 2 {
		t.Fatalf("roll-up: %d, %v", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	defer storage.SetCurrencyExponent("HUF", 0)() // the next release
	db, err := sqlite.Open(path, sqlite.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.RollupSuspects(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReviewSuspect(ctx, ids[0], "olga", storage.SuspectDismissed, "not a double"); err != nil {
		t.Fatal(err)
	}
	cs, err := db.SuspectCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var open, dismissed storage.Money
	open.AddAmount("1.50", "HUF")
	dismissed.AddAmount("1.50", "HUF")
	want := fmt.Sprintf("%+v", []storage.SuspectCount{
		{Kind: storage.SuspectBusinessKey, State: storage.SuspectDismissed, Currency: "HUF", Money: dismissed},
		{Kind: storage.SuspectBusinessKey, State: storage.SuspectOpen, Currency: "HUF", Money: open},
	})
	if got := fmt.Sprintf("%+v", cs); got != want {
		t.Errorf("suspect counts once HUF has no decimals:\n%s\nwant\n%s", got, want)
	}
}
