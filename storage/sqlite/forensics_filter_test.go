package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// keyFilterInUse records deliveries of a source without forensic keys on db until its
// writer has taken its n-th filter of keys into use: the lookups after it skip the keys
// the filter says the database does not hold.
func keyFilterInUse(t *testing.T, db *sqlite.DB, n int64) {
	t.Helper()
	for i := range 5000 {
		if db.KeyFilters() >= n {
			return
		}
		recordOne(t, db, delivery("warm-up", fmt.Sprintf("warm-%d-%d", n, i), "h"))
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the writer took %d filters of keys into use, want %d", db.KeyFilters(), n)
}

// A key that another process stores, once the writer's filter is in use, is matched:
// the filter is dropped when another connection commits (and built again, with the
// key), never trusted to say the key is not there.
func TestDB_KeyFilter_AnotherProcess(t *testing.T) {
	defer sqlite.SetFilterQuiet(0)()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	a := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(a)
	recordOne(t, a, forensicDelivery("ota", "evt_0", "B0", "C0"))
	keyFilterInUse(t, a, 1)
	b := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(b)
	other := recordOne(t, b, forensicDelivery("ota", "evt_1", "B1", "C1"))
	again := recordOne(t, a, forensicDelivery("ota", "evt_2", "B1", "C9"))
	if !flagged(again, storage.SuspectBusinessKey) {
		t.Fatalf("a business key another process stored: flags %v, want a business key (of delivery %d)", again.Suspects, other.ID)
	}
	pay := recordOne(t, a, forensicDelivery("payments", "pay_1", "", "C1"))
	if !flagged(pay, storage.SuspectCorrelation) {
		t.Fatalf("a correlation key another process stored: flags %v, want a correlation (with delivery %d)", pay.Suspects, other.ID)
	}

	// Built again, the filter holds the other process's keys.
	keyFilterInUse(t, a, 2)
	third := recordOne(t, a, forensicDelivery("ota", "evt_3", "B1", "C8"))
	if !flagged(third, storage.SuspectBusinessKey) {
		t.Fatalf("after the filter was built again: flags %v, want a business key", third.Suspects)
	}

	// A key written by anything else on the file (a tool of the operator's, an import)
	// counts the same.
	raw, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	filters := a.KeyFilters()
	if _, err := raw.Exec(`INSERT INTO business_keys (source, hash, delivery, seen_at) VALUES ('ota', 'B7', ?, ?)`,
		other.ID, other.ReceivedAt.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	seventh := recordOne(t, a, forensicDelivery("ota", "evt_7", "B7", "C7"))
	if !flagged(seventh, storage.SuspectBusinessKey) {
		t.Fatalf("a business key written by another tool: flags %v, want a business key", seventh.Suspects)
	}
	keyFilterInUse(t, a, filters+1)
	if eighth := recordOne(t, a, forensicDelivery("ota", "evt_8", "B7", "C8")); !flagged(eighth, storage.SuspectBusinessKey) {
		t.Fatalf("a business key written by another tool, the filter built again: flags %v, want a business key", eighth.Suspects)
	}
}

// A filter whose build read the keys before another process stored one is not taken
// into use: the other's key is matched.
func TestDB_KeyFilter_CommittedWhileBuilding(t *testing.T) {
	defer sqlite.SetFilterQuiet(0)()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	a := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(a)
	b := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(b)
	other := forensicDelivery("ota", "evt_1", "B1", "C1")
	built := make(chan error, 1)
	var once sync.Once
	defer sqlite.SetFilterBuilt(func() {
		// a's build has read the keys: the other process stores its own.
		once.Do(func() { built <- b.Record(ctx, other, forensicClaim) })
	})()
	recordOne(t, a, forensicDelivery("ota", "evt_0", "B0", "C0")) // asks for the filter
	select {
	case err := <-built:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the filter was never built")
	}
	again := recordOne(t, a, forensicDelivery("ota", "evt_2", "B1", "C9"))
	if !flagged(again, storage.SuspectBusinessKey) {
		t.Fatalf("a business key stored while the filter was built: flags %v, want a business key (of delivery %d)", again.Suspects, other.ID)
	}
	keyFilterInUse(t, a, 1)
	pay := recordOne(t, a, forensicDelivery("payments", "pay_1", "", "C1"))
	if !flagged(pay, storage.SuspectCorrelation) {
		t.Fatalf("a correlation key stored while the filter was built: flags %v, want a correlation", pay.Suspects)
	}
}

// Opened again, the writer builds its filter from the keys on file, moved and pending:
// a double of either is matched once the filter is in use.
func TestDB_KeyFilter_Restart(t *testing.T) {
	defer sqlite.SetForensicFlushAt(4)()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newClock(db)
	moved := recordOne(t, db, forensicDelivery("ota", "evt_1", "B1", "C1"))
	recordOne(t, db, forensicDelivery("ota", "evt_2", "B2", "C2")) // four pending: moved
	pending := recordOne(t, db, forensicDelivery("ota", "evt_3", "B3", "C3"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(db)
	if p, i, err := db.ForensicKeyCounts(context.Background()); err != nil || p != 2 || i != 4 {
		t.Fatalf("keys pending %d, indexed %d, %v; want 2 and 4", p, i, err)
	}
	keyFilterInUse(t, db, 1)
	for _, c := range []struct {
		what  string
		d     *storage.Delivery
		kind  storage.SuspectKind
		first *storage.Delivery
	}{
		{"a moved business key", forensicDelivery("ota", "evt_4", "B1", "C4"), storage.SuspectBusinessKey, moved},
		{"a pending business key", forensicDelivery("ota", "evt_5", "B3", "C5"), storage.SuspectBusinessKey, pending},
		{"a moved correlation key", forensicDelivery("payments", "pay_1", "", "C1"), storage.SuspectCorrelation, moved},
		{"a pending correlation key", forensicDelivery("payments", "pay_3", "", "C3"), storage.SuspectCorrelation, pending},
	} {
		if recordOne(t, db, c.d); !flagged(c.d, c.kind) {
			t.Errorf("%s: flags %v, want %s (of delivery %d)", c.what, c.d.Suspects, c.kind, c.first.ID)
		}
	}
}

// The writer remembers where each pending key was stored; a release deletes the
// released delivery's business key behind its back, and the next key stored takes the
// freed row. The released key is matched by nothing, the key in its row by its own
// doubles only.
func TestDB_ForensicKeys_RowOfAReleasedKey(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	newClock(db)
	released := bk("ota", "evt_1", "B1") // a business key, no correlation key: the only pending row
	if err := db.Record(ctx, released, forensicClaim); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "op", Reason: "resent"}); err != nil {
		t.Fatal(err)
	}
	if p, _, err := db.ForensicKeyCounts(ctx); err != nil || p != 0 {
		t.Fatalf("keys pending after the release: %d, %v; want 0", p, err)
	}
	next := bk("ota", "evt_2", "B2")
	if err := db.Record(ctx, next, forensicClaim); err != nil {
		t.Fatal(err)
	}
	resent := bk("ota", "evt_3", "B1")
	if err := db.Record(ctx, resent, forensicClaim); err != nil {
		t.Fatal(err)
	}
	if len(resent.Suspects) != 0 {
		t.Errorf("a re-send of the released delivery %d: flags %v, want none (not delivery %d's double)", released.ID, resent.Suspects, next.ID)
	}
	double := bk("ota", "evt_4", "B2")
	if err := db.Record(ctx, double, forensicClaim); err != nil {
		t.Fatal(err)
	}
	if !flagged(double, storage.SuspectBusinessKey) {
		t.Errorf("a double of delivery %d: flags %v, want a business key", next.ID, double.Suspects)
	}
}

// Close waits for a build of the filter that is reading: its read connection, closed
// after Close returned, would be the file's last, and the -wal and -shm that a clean
// close removes stayed beside the file (a test's temporary directory could not be
// removed once in a while).
func TestDB_KeyFilter_CloseWaitsForBuild(t *testing.T) {
	defer sqlite.SetFilterQuiet(0)()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	// Keys stored beforehand, so that the build of the next open has rows to read.
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(db)
	recordOne(t, db, forensicDelivery("ota", "evt_0", "B0", "C0"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	reading := make(chan struct{})
	var once sync.Once
	defer sqlite.SetFilterReading(func() {
		once.Do(func() {
			close(reading)
			time.Sleep(300 * time.Millisecond)
		})
	})()
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newClock(db)
	recordOne(t, db, forensicDelivery("ota", "evt_1", "B1", "C1"))
	select {
	case <-reading:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never built its filter of keys")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + side); err == nil {
			t.Errorf("after Close the database's %s is still there: a connection outlived Close", side)
		}
	}
}
