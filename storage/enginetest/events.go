package enginetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestEvents(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	start := c.Now()
	var all []*storage.Delivery
	for i := range 30 {
		prop := []string{"HTL-A", "HTL-B", "HTL-C"}[i%3]
		status := "confirmed"
		amount := ""
		if i%5 == 0 {
			status, amount = "cancelled", fmt.Sprintf("%d.50", 100+i)
		}
		all = append(all, recordEvent(t, db, "ota", fmt.Sprintf("evt_%d", i), "h", prop, fmt.Sprintf("BK-%d", i), status, amount))
		c.Add(time.Minute)
	}
	// A duplicate of evt_5 with another payload, one of evt_0 with the same, a rejection
	// and another source reusing a key.
	dupMismatch := recordEvent(t, db, "ota", "evt_5", "h2", "HTL-C", "BK-5", "cancelled", "120.50")
	dupSame := recordEvent(t, db, "ota", "evt_0", "h", "HTL-A", "BK-0", "cancelled", "100.50")
	rejected := record(t, db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401, Error: "signature: no"}, day)
	other := recordEvent(t, db, "cm", "evt_5", "x", "HTL-A", "BK-99", "confirmed", "")

	page := func(f storage.DeliveryFilter) storage.DeliveryPage {
		t.Helper()
		p, err := db.Deliveries(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("NewestFirstWithKeysetPages", func(t *testing.T) {
		var got []int64
		f := storage.DeliveryFilter{Limit: 7}
		for {
			p := page(f)
			got = append(got, ids(p.Deliveries)...)
			if p.Next == 0 {
				break
			}
			f.Before = p.Next
		}
		if len(got) != 34 || got[0] != other.ID || got[33] != all[0].ID {
			t.Fatalf("got %d ids %v, want all 34 newest first", len(got), got)
		}
		for i := 1; i < len(got); i++ {
			if got[i] >= got[i-1] {
				t.Fatalf("not strictly descending at %d: %v", i, got)
			}
		}
	})
	t.Run("Filters", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    storage.DeliveryFilter
			want []int64
		}{
			{"Source", storage.DeliveryFilter{Source: "cm"}, []int64{other.ID}},
			{"Outcome", storage.DeliveryFilter{Outcome: storage.Duplicate}, []int64{dupSame.ID, dupMismatch.ID}},
			{"Rejected", storage.DeliveryFilter{Outcome: storage.Rejected, Source: "ota"}, []int64{rejected.ID}},
			{"Mismatch", storage.DeliveryFilter{Mismatch: true}, []int64{dupMismatch.ID}},
			{"Booking", storage.DeliveryFilter{Booking: "BK-5"}, []int64{dupMismatch.ID, all[5].ID}},
			{"BookingAndOutcome", storage.DeliveryFilter{Booking: "BK-5", Outcome: storage.Duplicate}, []int64{dupMismatch.ID}},
			{"KeyAnySource", storage.DeliveryFilter{Key: "evt_5", KeySources: []string{"ota", "cm"}}, []int64{other.ID, dupMismatch.ID, all[5].ID}},
			{"KeyOneSource", storage.DeliveryFilter{Key: "evt_5", Source: "cm"}, []int64{other.ID}},
			{"KeyNoSources", storage.DeliveryFilter{Key: "evt_0"}, []int64{dupSame.ID, all[0].ID}},
			{"PropertyStatus", storage.DeliveryFilter{Property: "HTL-A", Status: "cancelled", Source: "ota"}, []int64{dupSame.ID, all[15].ID, all[0].ID}},
			{"TimeRange", storage.DeliveryFilter{From: start.Add(10 * time.Minute), To: start.Add(13 * time.Minute)}, []int64{all[12].ID, all[11].ID, all[10].ID}},
			{"Nothing", storage.DeliveryFilter{Booking: "BK-404"}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := ids(page(tc.f).Deliveries)
				if fmt.Sprint(got) != fmt.Sprint(tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
	})
	t.Run("EachDelivery", func(t *testing.T) {
		n := 0
		err := db.EachDelivery(ctx, storage.DeliveryFilter{Source: "ota", Status: "cancelled"}, func(d storage.Delivery) error {
			if d.EventStatus != "cancelled" || d.Source != "ota" {
				t.Errorf("unexpected %+v", d)
			}
			n++
			return nil
		})
		if err != nil || n != 8 {
			t.Fatalf("EachDelivery: %d rows, err %v; want 8", n, err)
		}
	})
}

func TestEvents_ScanWindow(t *testing.T, e Engine) {
	if testing.Short() {
		t.Skip("records many deliveries")
	}
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	// One match far below a window of non-matching rows: the first page stops at the
	// window's end and says so; following Next finds the match.
	match := recordEvent(t, db, "ota", "old", "h", "P", "B", "no-show", "")
	done := make(chan error, 64)
	for w := range 64 {
		go func() {
			var err error
			for i := range storage.ScanWindow/64 + 10 {
				d := delivery("ota", fmt.Sprintf("k%d-%d", w, i), "h")
				d.EventStatus = "confirmed"
				if err = db.Record(ctx, d, day); err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 64 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	f := storage.DeliveryFilter{Status: "no-show"}
	p, err := db.Deliveries(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Deliveries) != 0 || !p.Partial || p.Next == 0 {
		t.Fatalf("first page: %d events, partial %v, next %d; want an empty partial page", len(p.Deliveries), p.Partial, p.Next)
	}
	f.Before = p.Next
	if p, err = db.Deliveries(ctx, f); err != nil {
		t.Fatal(err)
	}
	if len(p.Deliveries) != 1 || p.Deliveries[0].ID != match.ID || p.Next != 0 {
		t.Fatalf("second page: %v next %d, want the match and the end", ids(p.Deliveries), p.Next)
	}
}

// TestEvents_UnstorableFilter: a filter value that no stored text can hold (a NUL
// byte, invalid UTF-8, as a console URL can carry them) matches nothing and fails
// nothing, in the events list and in the ledger alike.
func TestEvents_UnstorableFilter(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	recordEvent(t, db, "ota", "evt_1", "h", "HTL-A", "BK-1", "cancelled", "10.00")
	recordEvent(t, db, "ota", "evt_1", "h", "HTL-A", "BK-1", "cancelled", "10.00")
	for _, bad := range []string{"ota\x00", "\xff\xfe", "BK-1\x00"} {
		for name, f := range map[string]storage.DeliveryFilter{
			"Source":   {Source: bad},
			"Key":      {Key: bad, KeySources: []string{"ota", bad}},
			"KeyAlone": {Key: bad},
			"Booking":  {Booking: bad},
			"Property": {Property: bad},
			"Status":   {Status: bad, Source: "ota"},
			"Currency": {Currency: bad},
			"Flag":     {Flag: storage.SuspectKind(bad), FlagState: bad},
		} {
			p, err := db.Deliveries(ctx, f)
			if err != nil || len(p.Deliveries) != 0 {
				t.Errorf("%s %q: %d deliveries, %v; want none and no error", name, bad, len(p.Deliveries), err)
			}
			if err := db.EachDelivery(ctx, f, func(storage.Delivery) error { return fmt.Errorf("%s %q matched", name, bad) }); err != nil {
				t.Errorf("%s %q: EachDelivery: %v", name, bad, err)
			}
		}
		for name, f := range map[string]storage.LedgerFilter{
			"Source": {Source: bad}, "Property": {Property: bad}, "Currency": {Currency: bad},
		} {
			l, err := db.Ledger(ctx, f)
			if err != nil || len(l.Rows) != 0 || len(l.Totals) != 0 {
				t.Errorf("ledger %s %q: %+v, %v; want nothing and no error", name, bad, l, err)
			}
		}
	}
}

// TestEvents_BatchAndKey: a batch's items filtered by key (the console's events list
// of one batch, narrowed to one key) are the items of that key, not an error.
func TestEvents_BatchAndKey(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	record(t, db, delivery("adyen", "b", "h"), day) // the same key outside the batch
	b := items("adyen", "a", "b", "c")
	if err := db.RecordBatch(ctx, b, day); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]storage.DeliveryFilter{
		"KeySources": {Batch: b[0].ID, Key: "b", KeySources: []string{"adyen", "ota"}},
		"Source":     {Batch: b[0].ID, Key: "b", Source: "adyen"},
	} {
		p, err := db.Deliveries(ctx, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := ids(p.Deliveries); fmt.Sprint(got) != fmt.Sprint([]int64{b[1].ID}) {
			t.Fatalf("%s: %v, want the batch's item of key b, %d", name, got, b[1].ID)
		}
	}
}

// TestEvents_NoPropertyOrCurrency: the events list of the deliveries without a property,
// or without a currency, holds exactly those, however it is driven (by source, by
// outcome, by nothing), and none of a property or a currency that others carry.
func TestEvents_NoPropertyOrCurrency(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	rec := func(key, hash, property, amount, currency string) *storage.Delivery {
		t.Helper()
		d := delivery("ota", key, hash)
		d.Property, d.Amount, d.Currency = property, amount, currency
		return record(t, db, d, day)
	}
	a := rec("a", "h", "HTL-A", "10.00", "EUR")
	aDup := rec("a", "h", "HTL-A", "10.00", "EUR")
	b := rec("b", "h", "", "20.00", "EUR")
	bDup := rec("b", "h2", "", "25.00", "EUR")
	c := rec("c", "h", "", "30", "")
	cDup := rec("c", "h", "", "30", "")
	d := rec("d", "h", "HTL-A", "40", "")
	other := record(t, db, delivery("pms", "e", "h"), day)
	for _, tc := range []struct {
		name string
		f    storage.DeliveryFilter
		want []int64
	}{
		{"NoProperty", storage.DeliveryFilter{NoProperty: true}, []int64{other.ID, cDup.ID, c.ID, bDup.ID, b.ID}},
		{"NoPropertySource", storage.DeliveryFilter{NoProperty: true, Source: "ota"}, []int64{cDup.ID, c.ID, bDup.ID, b.ID}},
		{"NoPropertyDuplicates", storage.DeliveryFilter{NoProperty: true, Outcome: storage.Duplicate}, []int64{cDup.ID, bDup.ID}},
		{"NoPropertyCurrency", storage.DeliveryFilter{NoProperty: true, Currency: "EUR", Outcome: storage.Duplicate}, []int64{bDup.ID}},
		{"NoCurrency", storage.DeliveryFilter{NoCurrency: true, Source: "ota"}, []int64{d.ID, cDup.ID, c.ID}},
		{"NoCurrencyProperty", storage.DeliveryFilter{NoCurrency: true, Property: "HTL-A"}, []int64{d.ID}},
		{"NoneOfEither", storage.DeliveryFilter{NoProperty: true, NoCurrency: true, Outcome: storage.Duplicate}, []int64{cDup.ID}},
		{"Property", storage.DeliveryFilter{Property: "HTL-A"}, []int64{d.ID, aDup.ID, a.ID}},
		{"AnyProperty", storage.DeliveryFilter{Outcome: storage.Duplicate}, []int64{cDup.ID, bDup.ID, aDup.ID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := db.Deliveries(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(p.Deliveries); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			var each []int64
			if err := db.EachDelivery(ctx, tc.f, func(d storage.Delivery) error {
				each = append(each, d.ID)
				return nil
			}); err != nil || fmt.Sprint(each) != fmt.Sprint(tc.want) {
				t.Fatalf("EachDelivery: %v, %v; want %v", each, err, tc.want)
			}
		})
	}
}

// TestEvents_HasAmount: the events list of the deliveries that carry an amount holds
// exactly those, an amount that is no plain decimal included (the ledger counts it,
// unsummed), however it is driven (by source, by outcome, by nothing); a delivery with
// a currency but no amount is not among them.
func TestEvents_HasAmount(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	rec := func(source, key, hash, amount, currency string) *storage.Delivery {
		t.Helper()
		d := delivery(source, key, hash)
		d.Amount, d.Currency = amount, currency
		return record(t, db, d, day)
	}
	a := rec("ota", "a", "h", "10.00", "EUR")
	aDup := rec("ota", "a", "h", "10.00", "EUR")
	rec("ota", "b", "h", "", "EUR")
	bDup := rec("ota", "b", "h", "", "EUR")
	c := rec("ota", "c", "h", "12,50", "EUR")
	cDup := rec("ota", "c", "h", "12,50", "EUR")
	d := rec("ota", "d", "h", "0", "")
	dDup := rec("ota", "d", "h2", "", "")
	other := rec("pms", "e", "h", "7.00", "USD")
	otherDup := rec("pms", "e", "h", "", "")
	for _, tc := range []struct {
		name string
		f    storage.DeliveryFilter
		want []int64
	}{
		{"HasAmount", storage.DeliveryFilter{HasAmount: true}, []int64{other.ID, d.ID, cDup.ID, c.ID, aDup.ID, a.ID}},
		{"Source", storage.DeliveryFilter{HasAmount: true, Source: "ota"}, []int64{d.ID, cDup.ID, c.ID, aDup.ID, a.ID}},
		{"Duplicates", storage.DeliveryFilter{HasAmount: true, Outcome: storage.Duplicate}, []int64{cDup.ID, aDup.ID}},
		{"DuplicatesOfCurrency", storage.DeliveryFilter{HasAmount: true, Outcome: storage.Duplicate, Currency: "EUR"}, []int64{cDup.ID, aDup.ID}},
		{"NoCurrency", storage.DeliveryFilter{HasAmount: true, NoCurrency: true}, []int64{d.ID}},
		{"Accepted", storage.DeliveryFilter{HasAmount: true, Outcome: storage.Accepted, Source: "ota"}, []int64{d.ID, c.ID, a.ID}},
		{"OtherSource", storage.DeliveryFilter{HasAmount: true, Source: "pms"}, []int64{other.ID}},
		{"AnyAmount", storage.DeliveryFilter{Outcome: storage.Duplicate}, []int64{otherDup.ID, dDup.ID, cDup.ID, bDup.ID, aDup.ID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := db.Deliveries(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(p.Deliveries); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			var each []int64
			if err := db.EachDelivery(ctx, tc.f, func(d storage.Delivery) error {
				each = append(each, d.ID)
				return nil
			}); err != nil || fmt.Sprint(each) != fmt.Sprint(tc.want) {
				t.Fatalf("EachDelivery: %v, %v; want %v", each, err, tc.want)
			}
		})
	}
}
