package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

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
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP INDEX deliveries_key`,
		`CREATE INDEX deliveries_key ON deliveries (source, key)`,
		`DROP INDEX deliveries_booking`,
		`CREATE INDEX deliveries_booking ON deliveries (booking, id) WHERE booking != ''`,
		`DROP INDEX deliveries_body_from`,
		`DELETE FROM migrations WHERE name LIKE '%0020_%'`,
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := raw.Exec(`UPDATE deliveries SET body = NULL, body_from = ? WHERE id = ?`, first.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	raw.Close()

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
