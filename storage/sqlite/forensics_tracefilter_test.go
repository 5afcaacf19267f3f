package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// The writer's filter of keys holds the traces of expired keys too: a key it says was
// never traced is not looked up. Each test has the filter in use before the trace is
// written, so that a trace the filter missed goes unflagged.

// sweepExpired runs db's sweep of expired claims and wants at least n deleted (the
// warm-up deliveries of keyFilterInUse expire too).
func sweepExpired(t *testing.T, db *sqlite.DB, now time.Time, n int64) {
	t.Helper()
	if got, err := db.SweepExpired(context.Background(), now, 1000); err != nil || got < n {
		t.Fatalf("sweep of expired claims = %d, %v; want %d at least", got, err, n)
	}
}

// wantLate records a delivery of key on db and wants it accepted and flagged a late
// duplicate of first.
func wantLate(t *testing.T, db *sqlite.DB, what, key string, first *storage.Delivery) {
	t.Helper()
	late := recordOne(t, db, delivery("ota", key, "h-"+key))
	if late.Outcome != storage.Accepted || !flagged(late, storage.SuspectLateDuplicate) {
		t.Fatalf("%s: delivery of %s = %s, flags %v; want accepted, a late duplicate of delivery %d",
			what, key, late.Outcome, late.Suspects, first.ID)
	}
}

// The sweep of expired claims commits its traces on the write connection, which leaves
// the connection's data_version as it was: the filter in use takes them all the same.
func TestDB_TraceFilter_Sweep(t *testing.T) {
	db := storagetest.Open(t)
	clock := newClock(db)
	first := recordOne(t, db, delivery("ota", "evt_1", "h-evt_1"))
	keyFilterInUse(t, db, 1)
	clock.Add(2 * time.Hour)
	sweepExpired(t, db, clock.Now(), 1)
	wantLate(t, db, "traced by this process's sweep", "evt_1", first)
	if db.KeyFilters() != 1 {
		t.Fatalf("the writer took %d filters into use, want the one built before the sweep", db.KeyFilters())
	}
	if other := recordOne(t, db, delivery("ota", "evt_2", "h-evt_2")); len(other.Suspects) != 0 {
		t.Errorf("a key never traced: flags %v, want none", other.Suspects)
	}
}

// More traces than the writer keeps between two batches: it builds its filter again,
// rather than trust one that misses them.
func TestDB_TraceFilter_SweepPastTheBound(t *testing.T) {
	defer sqlite.SetTracedMax(1)()
	db := storagetest.Open(t)
	clock := newClock(db)
	first := recordOne(t, db, delivery("ota", "evt_1", "h-evt_1"))
	second := recordOne(t, db, delivery("ota", "evt_2", "h-evt_2"))
	keyFilterInUse(t, db, 1)
	clock.Add(2 * time.Hour)
	sweepExpired(t, db, clock.Now(), 2)
	wantLate(t, db, "the first of two traces past the bound", "evt_1", first)
	keyFilterInUse(t, db, 2)
	wantLate(t, db, "the second, the filter built again", "evt_2", second)
}

// The trace the writer leaves of an expired claim that a delivery takes over is in the
// filter: here that delivery is blocked as a business-key double, its claim undone, so
// the key's next delivery finds the trace and no claim.
func TestDB_TraceFilter_TakeOver(t *testing.T) {
	db := storagetest.Open(t)
	clock := newClock(db)
	blocks := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour, BusinessBlocks: true}
	record := func(key, business string) *storage.Delivery {
		t.Helper()
		d := bk("ota", key, business)
		if err := db.Record(context.Background(), d, blocks); err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := record("evt_1", "B1")
	keyFilterInUse(t, db, 1)
	clock.Add(2 * time.Hour) // evt_1's claim expired, not swept
	record("evt_2", "B2")
	if taken := record("evt_1", "B2"); taken.Outcome != storage.Duplicate {
		t.Fatalf("evt_1 again with evt_2's business key = %s, want blocked as a duplicate", taken.Outcome)
	}
	next := record("evt_1", "B3")
	if next.Outcome != storage.Accepted || !flagged(next, storage.SuspectLateDuplicate) {
		t.Fatalf("evt_1's next delivery = %s, flags %v; want accepted, a late duplicate of delivery %d",
			next.Outcome, next.Suspects, first.ID)
	}
}

// Traces another process writes (another handle on the file) are matched: its commit
// has the filter dropped, and the filter built again reads them from key_traces.
func TestDB_TraceFilter_AnotherProcess(t *testing.T) {
	defer sqlite.SetFilterQuiet(0)()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	a := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(a)
	recordOne(t, a, delivery("ota", "evt_0", "h-evt_0"))
	keyFilterInUse(t, a, 1)
	b := storagetest.OpenPath(t, path, sqlite.Options{})
	clock := newClock(b)
	first := recordOne(t, b, delivery("ota", "evt_1", "h-evt_1"))
	second := recordOne(t, b, delivery("ota", "evt_2", "h-evt_2"))
	clock.Add(2 * time.Hour)
	a.Now = clock.Now
	sweepExpired(t, b, clock.Now(), 2)
	wantLate(t, a, "traced by another process, the filter dropped", "evt_1", first)
	keyFilterInUse(t, a, 2)
	wantLate(t, a, "traced by another process, the filter built again", "evt_2", second)
}

// Opened again, the writer builds its filter with the traces on file.
func TestDB_TraceFilter_Restart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := newClock(db)
	first := recordOne(t, db, delivery("ota", "evt_1", "h-evt_1"))
	clock.Add(2 * time.Hour)
	sweepExpired(t, db, clock.Now(), 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = storagetest.OpenPath(t, path, sqlite.Options{})
	db.Now = clock.Now
	keyFilterInUse(t, db, 1)
	wantLate(t, db, "traced before a restart", "evt_1", first)
}

// A trace the sweep writes while the filter is being built, after the build read the
// database, is in the filter taken into use: the build's snapshot missed it, and the
// sweep's commit on the write connection does not make the build stale.
func TestDB_TraceFilter_TracedWhileBuilding(t *testing.T) {
	defer sqlite.SetFilterQuiet(0)()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db := storagetest.OpenPath(t, path, sqlite.Options{})
	clock := newClock(db)
	first := recordOne(t, db, delivery("ota", "evt_1", "h-evt_1"))
	keyFilterInUse(t, db, 1)
	clock.Add(2 * time.Hour)

	swept := make(chan error, 1)
	var once sync.Once
	defer sqlite.SetFilterBuilt(func() {
		// The build has read the database: the sweep traces evt_1 now.
		once.Do(func() {
			n, err := db.SweepExpired(ctx, clock.Now(), 1000)
			if err == nil && n < 1 {
				t.Errorf("sweep while building deleted %d claims, want evt_1's", n)
			}
			swept <- err
		})
	})()
	// Another connection's commit has the writer build its filter again.
	rawExec(t, rawDB(t, path), `INSERT INTO settings (name, value) VALUES ('rebuild', '1')`)
	keyFilterInUse(t, db, 2)
	select {
	case err := <-swept:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the filter was never built again")
	}
	wantLate(t, db, "traced while the filter was built", "evt_1", first)
}
