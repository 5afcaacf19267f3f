package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// sweepAll walks the retention sweep to its end, limit deliveries a batch, and returns
// how many it deleted. It fails the test if a batch deletes more than limit, or if the
// walk takes more batches than deliveries exist.
func sweepAll(t *testing.T, db *sqlite.DB, cutoff time.Time, limit int) int64 {
	t.Helper()
	enginetest.CatchUpRollups(t, db)
	var total int64
	var from storage.SweepCursor
	for range 1000 {
		n, next, err := db.SweepDeliveries(context.Background(), db.Now(), cutoff, from, limit)
		if err != nil {
			t.Fatal(err)
		}
		if n > int64(limit) {
			t.Fatalf("one batch of %d deleted %d", limit, n)
		}
		total += n
		if next.Done() {
			return total
		}
		from = next
	}
	t.Fatal("the retention sweep did not reach its end in 1000 batches")
	return 0
}

// TestDB_DeliveryIDsNeverReused: an id, once issued, is never issued again, not once
// the deliveries table has emptied, and not across a reopen.
func TestDB_DeliveryIDsNeverReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	open := func() (*sqlite.DB, *storagetest.Clock) {
		db, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return db, newClock(db)
	}
	db, clk := open()
	a := storagetest.Record(t, db, delivery("ota", "a", "h"), day)
	clk.Add(2 * time.Hour)
	if n := sweepAll(t, db, clk.Now().Add(-time.Hour), 100); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	b := storagetest.Record(t, db, delivery("ota", "b", "h"), day)
	if b.ID <= a.ID {
		t.Fatalf("after the table emptied a new delivery got id %d; %d was issued before", b.ID, a.ID)
	}
	clk.Add(2 * time.Hour)
	if n := sweepAll(t, db, clk.Now().Add(-time.Hour), 100); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, _ = open()
	defer db.Close()
	c := storagetest.Record(t, db, delivery("ota", "c", "h"), day)
	if c.ID <= b.ID {
		t.Fatalf("after a reopen a new delivery got id %d; %d was issued before", c.ID, b.ID)
	}
}

// TestDB_DeliveryIDsMigrate: a database from before the id sequence keeps its ids, and
// its new deliveries start above every id it still names, also those whose deliveries
// were swept (a claim, an attempt or the dashboard's rollup mark may name them).
func TestDB_DeliveryIDsMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := storagetest.Record(t, db, delivery("ota", "x", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	y := storagetest.Record(t, db, delivery("ota", "y", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the schema of before the sequence, with deliveries swept that a claim, an
	// attempt and the rollup mark still name.
	execFile(t, path,
		`DROP TABLE IF EXISTS delivery_seq`,
		`DELETE FROM migrations WHERE name LIKE '%0006_%'`,
		`UPDATE claims SET first_delivery = 41 WHERE key = 'x'`,
		`INSERT INTO attempts (source, key, delivery, started_at, duration_ms) VALUES ('ota', 'x', 37, 1, 1)`,
		`UPDATE delivery_stats_mark SET rolled_up_to = 29`,
	)

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	z := storagetest.Record(t, db, delivery("ota", "z", "h"), day)
	if z.ID != 42 {
		t.Fatalf("first delivery after the upgrade got id %d, want 42 (above the 41 a claim names)", z.ID)
	}
	for _, d := range []*storage.Delivery{x, y} {
		if got, err := db.Delivery(ctx, d.ID); err != nil || got.Key != d.Key {
			t.Fatalf("delivery %d after the upgrade: %+v, %v; want %s kept under its id", d.ID, got, err, d.Key)
		}
	}
}

// A clock that ran ahead for a while and was then set right stamps a stretch of
// deliveries in the future, amid ids whose receipt times are in the past. The
// retention sweep must still reach the deliveries after that stretch once they are
// past retention, not wait for the real time to catch up with the wrong stamps.
func TestDB_SweepDeliveries_ClockRanAhead(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	clk := newClock(db)
	var before, after []int64
	for range 3 {
		before = append(before, storagetest.Record(t, db, delivery("ota", "evt_"+strings.Repeat("b", len(before)+1), "h"), day).ID)
	}
	clk.Add(365 * 24 * time.Hour)
	ahead := storagetest.Record(t, db, delivery("ota", "evt_ahead", "h"), day)
	clk.Add(-365*24*time.Hour + time.Minute)
	for range 3 {
		after = append(after, storagetest.Record(t, db, delivery("ota", "evt_"+strings.Repeat("a", len(after)+1), "h"), day).ID)
	}
	clk.Add(31 * 24 * time.Hour)
	if n := sweepAll(t, db, db.Now().Add(-30*24*time.Hour), 2); n != 6 {
		t.Errorf("swept %d deliveries, want 6 (all but the one stamped in the future)", n)
	}
	for _, id := range append(before, after...) {
		if _, err := db.Delivery(ctx, id); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("delivery %d, past retention: %v, want it swept", id, err)
		}
	}
	if _, err := db.Delivery(ctx, ahead.ID); err != nil {
		t.Errorf("the delivery stamped in the future: %v, want it kept", err)
	}
}

// TestUpgrade_AttemptsOfSweptDeliveries: the attempts of deliveries that an earlier
// version swept without them are deleted as the database is upgraded; those of
// deliveries still stored stay.
func TestUpgrade_AttemptsOfSweptDeliveries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	kept := storagetest.Record(t, db, delivery("ota", "kept", "h"), day)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	execFile(t, path, `DELETE FROM migrations WHERE name = 'migrations/0027_attempts_swept.sql'`, `DROP INDEX attempts_delivery`,
		`INSERT INTO attempts (source, key, delivery, started_at, duration_ms) VALUES ('ota', 'gone', 999999, 1, 1), ('ota', 'kept', `+
			strconv.FormatInt(kept.ID, 10)+`, 1, 1)`)
	db = storagetest.OpenPath(t, path, sqlite.Options{})
	for key, want := range map[string]int{"gone": 0, "kept": 1} {
		if as, err := db.Attempts(context.Background(), "ota", key); err != nil || len(as) != want {
			t.Errorf("%s after the upgrade: %d attempts, %v; want %d", key, len(as), err, want)
		}
	}
}
