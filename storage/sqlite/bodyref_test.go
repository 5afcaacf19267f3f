package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // a connection of the test's own, to look at stored rows

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// storedBody is what the deliveries table itself holds for delivery id: whether it
// stores a body of its own, and the delivery it refers to for its body (0: none).
func storedBody(t *testing.T, path string, id int64) (own bool, from int64) {
	t.Helper()
	c, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.QueryRow(`SELECT body IS NOT NULL, body_from FROM deliveries WHERE id = ?`, id).Scan(&own, &from); err != nil {
		t.Fatalf("delivery %d as stored: %v", id, err)
	}
	return own, from
}

// wantWhole fails unless the console's reads (one delivery, a key's deliveries) show
// delivery id with body and the header header: value.
func wantWhole(t *testing.T, db *sqlite.DB, id int64, body []byte, header, value string) {
	t.Helper()
	ctx := context.Background()
	d, err := db.Delivery(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.Body, body) {
		t.Errorf("Delivery(%d).Body = %q, want %q", id, d.Body, body)
	}
	if got := d.Headers[header]; len(got) != 1 || got[0] != value {
		t.Errorf("Delivery(%d).Headers[%s] = %q, want [%q]", id, header, got, value)
	}
	all, err := db.KeyDeliveries(ctx, d.Source, d.Key)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range all {
		if k.ID == id {
			found = true
			if !bytes.Equal(k.Body, body) {
				t.Errorf("KeyDeliveries: delivery %d body = %q, want %q", id, k.Body, body)
			}
		}
	}
	if !found {
		t.Errorf("KeyDeliveries(%s, %s) does not hold delivery %d", d.Source, d.Key, id)
	}
}

// wantListed fails unless the events list for f holds exactly the deliveries ids, newest
// first.
func wantListed(t *testing.T, db *sqlite.DB, f storage.DeliveryFilter, ids ...int64) {
	t.Helper()
	page, err := db.Deliveries(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, d := range page.Deliveries {
		got = append(got, d.ID)
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	if !slices.Equal(got, ids) {
		t.Errorf("Deliveries(%+v) = %v, want %v", f, got, ids)
	}
}

// withBooking sets d's booking, as the receiver takes it from the body by the source's
// booking_field.
func withBooking(d *storage.Delivery, booking string) *storage.Delivery {
	d.Booking = booking
	return d
}

// A duplicate stored by reference is left out of the indexes of keys and bookings and
// found through the delivery it refers to: the key's deliveries and the filters of key
// and booking list it as before. One whose booking is not its first delivery's (the
// source's booking_field changed between them) stores its own body, and is listed under
// its own booking only.
func TestDB_BodyByReference_Listed(t *testing.T) {
	key := func(k string) storage.DeliveryFilter { return storage.DeliveryFilter{Key: k, Source: "ota"} }
	booking := func(b string) storage.DeliveryFilter { return storage.DeliveryFilter{Booking: b} }
	t.Run("References", func(t *testing.T) {
		db := storagetest.Open(t)
		first := storagetest.Record(t, db, withBooking(delivery("ota", "evt_1", "h1"), "BK-1"), day)
		a := storagetest.Record(t, db, withBooking(withSignature(delivery("ota", "evt_1", "h1"), "v1,a"), "BK-1"), day)
		b := storagetest.Record(t, db, withBooking(withSignature(delivery("ota", "evt_1", "h1"), "v1,b"), "BK-1"), day)
		other := storagetest.Record(t, db, withBooking(delivery("ota", "evt_2", "h2"), "BK-2"), day)
		for _, dup := range []*storage.Delivery{a, b} {
			if own, from := storedBody(t, db.Path(), dup.ID); own || from != first.ID {
				t.Errorf("duplicate %d: own body %v, body_from %d; want a reference to %d", dup.ID, own, from, first.ID)
			}
			wantWhole(t, db, dup.ID, first.Body, "Webhook-Signature", "v1,"+map[int64]string{a.ID: "a", b.ID: "b"}[dup.ID])
		}
		wantListed(t, db, key("evt_1"), first.ID, a.ID, b.ID)
		wantListed(t, db, storage.DeliveryFilter{Key: "evt_1", KeySources: []string{"cm", "ota"}}, first.ID, a.ID, b.ID)
		wantListed(t, db, key("evt_2"), other.ID)
		wantListed(t, db, booking("BK-1"), first.ID, a.ID, b.ID)
		wantListed(t, db, storage.DeliveryFilter{Booking: "BK-1", Outcome: storage.Duplicate}, a.ID, b.ID)
		wantListed(t, db, storage.DeliveryFilter{Booking: "BK-1", Key: "evt_1", Source: "ota"}, first.ID, a.ID, b.ID)
		wantListed(t, db, storage.DeliveryFilter{Booking: "BK-1", Before: b.ID}, first.ID, a.ID)
	})
	t.Run("OtherBooking", func(t *testing.T) {
		db := storagetest.Open(t)
		first := storagetest.Record(t, db, withBooking(delivery("ota", "evt_1", "h1"), "BK-1"), day)
		dup := storagetest.Record(t, db, withBooking(delivery("ota", "evt_1", "h1"), "BK-9"), day)
		if own, from := storedBody(t, db.Path(), dup.ID); !own || from != 0 {
			t.Errorf("duplicate under another booking: own body %v, body_from %d; want its own body", own, from)
		}
		wantListed(t, db, booking("BK-1"), first.ID)
		wantListed(t, db, booking("BK-9"), dup.ID)
		wantListed(t, db, key("evt_1"), first.ID, dup.ID)
	})
	t.Run("OtherBookingInTheSameTransaction", func(t *testing.T) {
		db := storagetest.Open(t)
		first, dup := withBooking(delivery("ota", "evt_1", "h1"), "BK-1"), withBooking(delivery("ota", "evt_1", "h1"), "BK-9")
		if err := db.RecordBatch(context.Background(), []*storage.Delivery{first, dup}, day); err != nil {
			t.Fatal(err)
		}
		if own, from := storedBody(t, db.Path(), dup.ID); !own || from != 0 {
			t.Errorf("duplicate under another booking: own body %v, body_from %d; want its own body", own, from)
		}
		wantListed(t, db, booking("BK-1"), first.ID)
		wantListed(t, db, booking("BK-9"), dup.ID)
	})
}

func withSignature(d *storage.Delivery, sig string) *storage.Delivery {
	d.Headers = map[string][]string{"Webhook-Signature": {sig}}
	return d
}

func TestDB_DuplicateBodyByReference(t *testing.T) {
	t.Run("Redelivery", func(t *testing.T) {
		db := storagetest.Open(t)
		first := storagetest.Record(t, db, withSignature(delivery("ota", "evt_1", "h1"), "v1,first"), day)
		dup := storagetest.Record(t, db, withSignature(delivery("ota", "evt_1", "h1"), "v1,second"), day)
		if own, from := storedBody(t, db.Path(), dup.ID); own || from != first.ID {
			t.Errorf("duplicate stored own body %v, body_from %d; want a reference to %d", own, from, first.ID)
		}
		if own, from := storedBody(t, db.Path(), first.ID); !own || from != 0 {
			t.Errorf("first delivery stored own body %v, body_from %d; want its own body", own, from)
		}
		wantWhole(t, db, dup.ID, first.Body, "Webhook-Signature", "v1,second")
		wantWhole(t, db, first.ID, first.Body, "Webhook-Signature", "v1,first")
	})
	t.Run("SameHashOtherBytes", func(t *testing.T) {
		// The payload hash is of the canonical JSON: another spacing hashes alike but
		// is another body, shown as it came.
		db := storagetest.Open(t)
		storagetest.Record(t, db, delivery("ota", "evt_1", "h1"), day)
		d := delivery("ota", "evt_1", "h1")
		d.Body = []byte(`{ "id": "evt_1" }`)
		dup := storagetest.Record(t, db, withSignature(d, "v1,second"), day)
		if own, from := storedBody(t, db.Path(), dup.ID); !own || from != 0 {
			t.Errorf("duplicate stored own body %v, body_from %d; want its own body", own, from)
		}
		wantWhole(t, db, dup.ID, []byte(`{ "id": "evt_1" }`), "Webhook-Signature", "v1,second")
	})
	t.Run("Mismatch", func(t *testing.T) {
		db := storagetest.Open(t)
		storagetest.Record(t, db, delivery("ota", "evt_1", "h1"), day)
		d := delivery("ota", "evt_1", "h2")
		d.Body = []byte(`{"id":"evt_1","amount":"10"}`)
		dup := storagetest.Record(t, db, withSignature(d, "v1,second"), day)
		if !dup.Mismatch {
			t.Fatal("want a mismatch")
		}
		if own, _ := storedBody(t, db.Path(), dup.ID); !own {
			t.Error("a mismatching duplicate stored no body of its own")
		}
		wantWhole(t, db, dup.ID, d.Body, "Webhook-Signature", "v1,second")
	})
	t.Run("FirstInTheSameTransaction", func(t *testing.T) {
		// Two items of one key in one request: the second is a duplicate of a first
		// delivery that is written in the same transaction.
		db := storagetest.Open(t)
		a, b := delivery("ota", "evt_1", "h1"), withSignature(delivery("ota", "evt_1", "h1"), "v1,second")
		if err := db.RecordBatch(context.Background(), []*storage.Delivery{a, b}, day); err != nil {
			t.Fatal(err)
		}
		if b.Outcome != storage.Duplicate || b.FirstDelivery != a.ID {
			t.Fatalf("second item: %s of %d, want a duplicate of %d", b.Outcome, b.FirstDelivery, a.ID)
		}
		if own, from := storedBody(t, db.Path(), b.ID); own || from != a.ID {
			t.Errorf("second item stored own body %v, body_from %d; want a reference to %d", own, from, a.ID)
		}
		wantWhole(t, db, b.ID, a.Body, "Webhook-Signature", "v1,second")
	})
}

// The retention sweep deletes a first delivery once it is old enough while a later
// duplicate that refers to its body is kept: the duplicate must keep its body.
func TestDB_SweepDeliveries_KeepsReferencedBody(t *testing.T) {
	db := storagetest.Open(t)
	clk := newClock(db)
	first := storagetest.Record(t, db, delivery("ota", "evt_1", "h1"), day)
	storagetest.Record(t, db, delivery("ota", "evt_1", "h1"), day) // an early duplicate
	clk.Add(2 * time.Hour)
	late := storagetest.Record(t, db, withSignature(delivery("ota", "evt_1", "h1"), "v1,late"), day)
	if _, from := storedBody(t, db.Path(), late.ID); from != first.ID {
		t.Fatalf("late duplicate body_from %d, want %d", from, first.ID)
	}
	// Batches of one: the first delivery and its early duplicate go in separate
	// batches, the late one is kept.
	if n := sweepAll(t, db, db.Now().Add(-time.Hour), 1); n != 2 {
		t.Fatalf("swept %d deliveries, want 2 (the first and the early duplicate)", n)
	}
	if _, err := db.Delivery(context.Background(), first.ID); err == nil {
		t.Fatal("the first delivery was kept")
	}
	if own, from := storedBody(t, db.Path(), late.ID); !own || from != 0 {
		t.Errorf("kept duplicate: own body %v, body_from %d; want its own copy", own, from)
	}
	wantWhole(t, db, late.ID, first.Body, "Webhook-Signature", "v1,late")
	// With a body of its own, the kept duplicate is found by its key as a first
	// delivery is.
	wantListed(t, db, storage.DeliveryFilter{Key: "evt_1", Source: "ota"}, late.ID)
}

// A backup is a copy of the file: restored, a duplicate stored by reference still shows
// its body.
func TestRestore_DuplicateBodyByReference(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := storagetest.OpenPath(t, filepath.Join(dir, "live.db"), sqlite.Options{})
	first := storagetest.Record(t, db, delivery("ota", "evt_1", "h1"), day)
	dup := storagetest.Record(t, db, withSignature(delivery("ota", "evt_1", "h1"), "v1,second"), day)
	backup := filepath.Join(dir, "backup.db")
	if _, err := db.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(dir, "restored.db")
	if _, err := sqlite.Restore(ctx, backup, restored); err != nil {
		t.Fatal(err)
	}
	rdb := storagetest.OpenPath(t, restored, sqlite.Options{})
	if own, from := storedBody(t, restored, dup.ID); own || from != first.ID {
		t.Errorf("restored duplicate: own body %v, body_from %d; want a reference to %d", own, from, first.ID)
	}
	wantWhole(t, rdb, dup.ID, first.Body, "Webhook-Signature", "v1,second")
}

// The writer's look-up of holders, the sweep's hand-over of bodies and its delete (which
// looks for the items that still read a first item's envelope) go through indexes: none
// reads every claim or every delivery.
func TestDB_BodyByReferencePlans(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	holders, err := sqlite.ExplainHolders(ctx, db, 4)
	if err != nil {
		t.Fatal(err)
	}
	handOver, err := db.ExplainHandOverBodies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	envelopes, err := db.ExplainSweepDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("holders:\n%s\nhand-over:\n%s\ndelete:\n%s", holders, handOver, envelopes)
	for _, plan := range []string{holders, handOver, envelopes} {
		for _, line := range strings.Split(plan, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "SCAN") && !strings.Contains(line, "VALUES CLAUSE") {
				t.Errorf("plan reads a whole table or index: %q in\n%s", line, plan)
			}
		}
	}
}

// Without an index of receipt times, the events list's time filter and the retention
// sweep find ids by a binary search whose every query is a look-up by id: none reads
// the table (min and max in one query did, at every page of a time range).
func TestDB_ReceivedSincePlan(t *testing.T) {
	db := storagetest.Open(t)
	plan, err := db.ExplainReceivedSince(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(plan, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "SCAN deliveries") {
			t.Errorf("plan reads the whole table: %q in\n%s", line, plan)
		}
	}
}

// The page cache and the memory map are set on every connection, readers and the
// writer alike, from Options (defaults when zero; a negative MmapSize turns the map off),
// except that the writer's cache is bounded by WriterCacheSize.
func TestOpen_PageSettings(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name                         string
		opt                          sqlite.Options
		wantCache, wantWrite, wantMm int64
	}{
		{"Defaults", sqlite.Options{}, -sqlite.DefaultCacheSize / 1024, -sqlite.WriterCacheSize / 1024, sqlite.DefaultMmapSize},
		{"Set", sqlite.Options{CacheSize: 32 << 20, MmapSize: 64 << 20}, -32 << 10, -sqlite.WriterCacheSize / 1024, 64 << 20},
		{"Small", sqlite.Options{CacheSize: 1 << 20}, -1 << 10, -1 << 10, sqlite.DefaultMmapSize},
		{"NoMap", sqlite.Options{MmapSize: -1}, -sqlite.DefaultCacheSize / 1024, -sqlite.WriterCacheSize / 1024, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "db.sqlite"), tc.opt)
			rc, rm, wc, wm, err := db.PageSettings(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rc != tc.wantCache || wc != tc.wantWrite {
				t.Errorf("cache_size read %d, write %d; want %d and %d", rc, wc, tc.wantCache, tc.wantWrite)
			}
			// SQLite caps the map at its build's limit; it is on when asked for.
			if wantOn := tc.wantMm > 0; (rm > 0) != wantOn || (wm > 0) != wantOn || rm > tc.wantMm || wm > tc.wantMm {
				t.Errorf("mmap_size read %d, write %d; want %d (or SQLite's limit below it)", rm, wm, tc.wantMm)
			}
			t.Logf("mmap_size read %d, write %d", rm, wm)
		})
	}
}

// Past the lock byte's page (here a smaller size), the write connection gets the whole
// page cache back: as the file grows past it, and at Open when it is that large already.
func TestOpen_WriterCacheGrows(t *testing.T) {
	ctx := context.Background()
	full, bounded := -sqlite.DefaultCacheSize/1024, -sqlite.WriterCacheSize/1024
	writerCache := func(db *sqlite.DB) int64 {
		t.Helper()
		_, _, wc, _, err := db.PageSettings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return wc
	}
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	storagetest.Record(t, db, delivery("ota", "evt_1", "h1"), day)
	if wc := writerCache(db); wc != bounded {
		t.Fatalf("writer's cache_size %d under the size, want %d", wc, bounded)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sqlite.SetBigFile(t, fi.Size(), 1)
	db = storagetest.OpenPath(t, path, sqlite.Options{})
	if wc := writerCache(db); wc != bounded {
		t.Fatalf("writer's cache_size %d at Open under the size, want %d", wc, bounded)
	}
	body := bytes.Repeat([]byte("x"), 2000)
	for i := 0; writerCache(db) != full; i++ {
		if i == 5000 {
			t.Fatalf("writer's cache_size still %d after %d batches, want %d", writerCache(db), i, full)
		}
		d := delivery("ota", fmt.Sprint("evt_grow_", i), "h1")
		d.Body = body
		storagetest.Record(t, db, d, day)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again := storagetest.OpenPath(t, path, sqlite.Options{})
	if wc := writerCache(again); wc != full {
		t.Errorf("reopened past the size: writer's cache_size %d, want %d", wc, full)
	}
}

// A delivery that business_key_blocks turns into a duplicate in its own transaction
// may already be the body of a redelivery of its key in that transaction. It is then no
// claim's first delivery, owed nothing: once it is past retention and the redelivery
// is not, the redelivery must keep its body.
func TestDB_SweepDeliveries_KeepsBodyOfBlockedDelivery(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	clk := newClock(db)
	opt := storage.ClaimOptions{TTL: 24 * time.Hour, BusinessWindow: time.Hour, BusinessBlocks: true}
	storagetest.Record(t, db, bk("ota", "evt_1", "B"), opt)
	clk.Add(time.Minute)
	// A re-send under a new id and, a millisecond later, its own redelivery, committed
	// together.
	again, redelivered := bk("ota", "evt_2", "B"), withSignature(bk("ota", "evt_2", "B"), "v1,again")
	again.ReceivedAt = db.Now()
	redelivered.ReceivedAt = again.ReceivedAt.Add(time.Millisecond)
	if err := db.RecordBatch(ctx, []*storage.Delivery{again, redelivered}, opt); err != nil {
		t.Fatal(err)
	}
	if again.Outcome != storage.Duplicate || redelivered.Outcome != storage.Duplicate {
		t.Fatalf("outcomes %s, %s; want both blocked as duplicates", again.Outcome, redelivered.Outcome)
	}
	clk.Add(time.Hour)
	// The cutoff falls between the two: the blocked re-send goes, its redelivery stays.
	if n := sweepAll(t, db, redelivered.ReceivedAt, 1); n != 2 {
		t.Fatalf("swept %d deliveries, want 2 (the first and the blocked re-send)", n)
	}
	if _, err := db.Delivery(ctx, again.ID); err == nil {
		t.Fatal("the blocked re-send was kept")
	}
	wantWhole(t, db, redelivered.ID, again.Body, "Webhook-Signature", "v1,again")
}

// SQLite holds cache_size in KiB in a 32-bit integer: a page cache of less than a KiB,
// or of more than that integer holds, would silently become no cache at all. Open
// refuses both, naming the setting.
func TestOpen_CacheSizeOutOfRange(t *testing.T) {
	for _, size := range []int64{1, 64, 1023, (1<<31)*1024 + 1024, 1 << 62} {
		path := filepath.Join(t.TempDir(), "db.sqlite")
		db, err := sqlite.Open(path, sqlite.Options{CacheSize: size})
		if err == nil {
			db.Close()
			t.Errorf("Open with CacheSize %d: no error", size)
			continue
		}
		if !strings.Contains(err.Error(), "cache_size") {
			t.Errorf("Open with CacheSize %d: %v, want an error naming cache_size", size, err)
		}
	}
	for _, size := range []int64{1024, (1<<31 - 1) * 1024} {
		storagetest.OpenPath(t, filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{CacheSize: size})
	}
}
