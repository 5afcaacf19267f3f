package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// A file written before the indexes of keys and bookings left out the duplicates stored
// by reference holds such duplicates whose booking is not their first delivery's: the
// writer then referred to a first delivery whose body was byte for byte the same,
// whatever booking the source's booking_field took from it. Once upgraded, every
// duplicate is listed under its own booking and its key, and shows its body.
func TestOpen_BodyByReferenceUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	first := storagetest.Record(t, db, withBooking(delivery("ota", "evt_1", "h1"), "BK-1"), day)
	same := storagetest.Record(t, db, withBooking(withSignature(delivery("ota", "evt_1", "h1"), "v1,same"), "BK-1"), day)
	other := storagetest.Record(t, db, withBooking(withSignature(delivery("ota", "evt_1", "h1"), "v1,other"), "BK-9"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the schema and the rows of before: the indexes whole, and the duplicate
	// under another booking stored by reference, as the writer then stored it.
	execFile(t, path,
		`DROP INDEX deliveries_key`,
		`CREATE INDEX deliveries_key ON deliveries (source, key)`,
		`DROP INDEX deliveries_booking`,
		`CREATE INDEX deliveries_booking ON deliveries (booking, id) WHERE booking != ''`,
		`DROP INDEX deliveries_body_from`,
		`DELETE FROM migrations WHERE name LIKE '%0020_%'`,
		fmt.Sprintf(`UPDATE deliveries SET body = NULL, body_from = %d WHERE id = %d`, first.ID, other.ID),
	)

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	booking := func(b string) storage.DeliveryFilter { return storage.DeliveryFilter{Booking: b} }
	wantListed(t, db, booking("BK-1"), first.ID, same.ID)
	wantListed(t, db, booking("BK-9"), other.ID)
	wantListed(t, db, storage.DeliveryFilter{Booking: "BK-9", Source: "ota", Outcome: storage.Duplicate}, other.ID)
	wantListed(t, db, storage.DeliveryFilter{Key: "evt_1", Source: "ota"}, first.ID, same.ID, other.ID)
	if own, from := storedBody(t, path, same.ID); own || from != first.ID {
		t.Errorf("duplicate under its first delivery's booking: own body %v, body_from %d; want a reference to %d", own, from, first.ID)
	}
	wantWhole(t, db, same.ID, first.Body, "Webhook-Signature", "v1,same")
	wantWhole(t, db, other.ID, first.Body, "Webhook-Signature", "v1,other")
}

// The pages of a key and of a booking find the duplicates stored by reference among the
// others, newest first, a page at a time, and the key's first deliveries oldest first.
func TestDB_BodyByReference_Pages(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	var all []int64
	record := func(key, booking, body string) int64 {
		d := withBooking(delivery("ota", key, "h-"+key), booking)
		if body != "" {
			d.Body = []byte(body)
		}
		return storagetest.Record(t, db, d, day).ID
	}
	first := record("evt_1", "BK-1", "")
	all = append(all, first)
	for i := range 6 {
		record("evt_x"+strconv.Itoa(i), "BK-1x", "")
		all = append(all, record("evt_1", "BK-1", "")) // by reference
		if i%2 == 0 {
			all = append(all, record("evt_1", "BK-1", `{ "id": "evt_1" }`)) // its own body
		}
	}
	refs := 0
	for _, id := range all[1:] {
		if _, from := storedBody(t, db.Path(), id); from == first {
			refs++
		}
	}
	if refs != 6 {
		t.Fatalf("%d duplicates stored by reference, want 6", refs)
	}
	for _, f := range []storage.DeliveryFilter{
		{Key: "evt_1", Source: "ota", Limit: 4},
		{Booking: "BK-1", Limit: 4},
		{Booking: "BK-1", Outcome: storage.Duplicate, Limit: 3},
		{Key: "evt_1", KeySources: []string{"cm", "ota"}, Limit: 2},
	} {
		want := all
		if f.Outcome == storage.Duplicate {
			want = all[1:]
		}
		var got []int64
		for range 20 {
			page, err := db.Deliveries(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Deliveries {
				got = append(got, d.ID)
			}
			if page.Next == 0 {
				break
			}
			f.Before = page.Next
		}
		w := slices.Clone(want)
		slices.Reverse(w)
		if !slices.Equal(got, w) {
			t.Errorf("pages of %+v: %v, want %v", f, got, w)
		}
		var each []int64
		f.Before = 0
		if err := db.EachDelivery(ctx, f, func(d storage.Delivery) error { each = append(each, d.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(each, w) {
			t.Errorf("EachDelivery(%+v): %v, want %v", f, each, w)
		}
	}
	got, more, err := db.FirstKeyDeliveries(ctx, "ota", "evt_1", 5)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, d := range got {
		ids = append(ids, d.ID)
		if len(d.Body) == 0 {
			t.Errorf("FirstKeyDeliveries: delivery %d without its body", d.ID)
		}
	}
	if !more || !slices.Equal(ids, all[:5]) {
		t.Errorf("FirstKeyDeliveries(5) = %v, more %v; want %v, more true", ids, more, all[:5])
	}
	every, err := db.KeyDeliveries(ctx, "ota", "evt_1")
	if err != nil || len(every) != len(all) {
		t.Errorf("KeyDeliveries: %d deliveries, %v; want %d", len(every), err, len(all))
	}
}

// The retention sweep deletes a first delivery while duplicates refer to its body, and a
// duplicate that referred to one kept: the kept ones are listed by key and booking as
// before, and show their bodies.
func TestDB_SweepDeliveries_ReferrersListed(t *testing.T) {
	db := storagetest.Open(t)
	clk := newClock(db)
	first := storagetest.Record(t, db, withBooking(delivery("ota", "evt_1", "h1"), "BK-1"), day)
	early := storagetest.Record(t, db, withBooking(delivery("ota", "evt_1", "h1"), "BK-1"), day)
	keptFirst := storagetest.Record(t, db, withBooking(delivery("cm", "evt_2", "h2"), "BK-1"), storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	earlyOfKept := storagetest.Record(t, db, withBooking(delivery("cm", "evt_2", "h2"), "BK-1"), day)
	clk.Add(2 * time.Hour)
	late := storagetest.Record(t, db, withBooking(delivery("ota", "evt_1", "h1"), "BK-1"), day)
	lateOfKept := storagetest.Record(t, db, withBooking(delivery("cm", "evt_2", "h2"), "BK-1"), day)
	for _, d := range []*storage.Delivery{early, late} {
		if _, from := storedBody(t, db.Path(), d.ID); from != first.ID {
			t.Fatalf("duplicate %d refers to %d, want %d", d.ID, from, first.ID)
		}
	}
	for _, d := range []*storage.Delivery{earlyOfKept, lateOfKept} {
		if _, from := storedBody(t, db.Path(), d.ID); from != keptFirst.ID {
			t.Fatalf("duplicate %d refers to %d, want %d", d.ID, from, keptFirst.ID)
		}
	}
	if n := sweepAll(t, db, db.Now().Add(-time.Hour), 1); n != 3 {
		t.Fatalf("swept %d deliveries, want 3", n)
	}
	wantListed(t, db, storage.DeliveryFilter{Booking: "BK-1"}, keptFirst.ID, late.ID, lateOfKept.ID)
	wantListed(t, db, storage.DeliveryFilter{Key: "evt_1", Source: "ota"}, late.ID)
	wantListed(t, db, storage.DeliveryFilter{Key: "evt_2", Source: "cm"}, keptFirst.ID, lateOfKept.ID)
	for id, body := range map[int64][]byte{late.ID: first.Body, lateOfKept.ID: keptFirst.Body, keptFirst.ID: keptFirst.Body} {
		d, err := db.Delivery(context.Background(), id)
		if err != nil || !bytes.Equal(d.Body, body) {
			t.Errorf("Delivery(%d).Body = %q, %v; want %q", id, d.Body, err, body)
		}
	}
}
