package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// forensicDelivery is a delivery of source under key with a business key and a
// correlation key of rule "r".
func forensicDelivery(source, key, business, correlation string) *storage.Delivery {
	d := delivery(source, key, "h-"+key)
	d.BusinessKey = business
	d.Correlations = []storage.CorrelationKey{{Rule: "r", Hash: correlation, Window: time.Hour}}
	return d
}

var forensicClaim = storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}

func recordOne(t *testing.T, db *sqlite.DB, d *storage.Delivery) *storage.Delivery {
	t.Helper()
	if err := db.Record(context.Background(), d, forensicClaim); err != nil {
		t.Fatal(err)
	}
	return d
}

func flagged(d *storage.Delivery, kind storage.SuspectKind) bool {
	return slices.Contains(d.Suspects, kind)
}

// The keys that intake stores wait, unindexed, until enough of them are pending, and
// are then moved into their indexed tables: a key is matched whether it waits or was
// moved, and the keys that wait are matched after the database is closed and opened
// again, as after a crash.
func TestDB_ForensicKeys_PendingAndMoved(t *testing.T) {
	defer sqlite.SetForensicFlushAt(6)()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newClock(db)
	counts := func(wantPending, wantIndexed int) {
		t.Helper()
		pending, indexed, err := db.ForensicKeyCounts(ctx)
		if err != nil || pending != wantPending || indexed != wantIndexed {
			t.Fatalf("keys pending %d, indexed %d, %v; want %d and %d", pending, indexed, err, wantPending, wantIndexed)
		}
	}
	recordOne(t, db, forensicDelivery("ota", "evt_1", "B1", "C1"))
	recordOne(t, db, forensicDelivery("ota", "evt_2", "B2", "C2"))
	counts(4, 0)
	// A pending correlation key is matched.
	if pay := recordOne(t, db, forensicDelivery("payments", "pay_1", "", "C1")); !flagged(pay, storage.SuspectCorrelation) {
		t.Fatalf("a pending correlation key: flags %v, want a correlation", pay.Suspects)
	}
	counts(5, 0)
	recordOne(t, db, forensicDelivery("ota", "evt_3", "B3", "C3"))
	counts(0, 7) // six or more pending: moved
	// A moved business key is matched.
	if again := recordOne(t, db, forensicDelivery("ota", "evt_4", "B1", "C4")); !flagged(again, storage.SuspectBusinessKey) {
		t.Fatalf("a moved business key: flags %v, want a business key", again.Suspects)
	}
	fifth := recordOne(t, db, forensicDelivery("ota", "evt_5", "B5", "C5"))
	counts(4, 7)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened again, the keys still pending are matched, by the key lab and by intake.
	db = storagetest.OpenPath(t, path, sqlite.Options{})
	clock := newClock(db)
	probe, err := db.WouldFlag(ctx, storage.Probe{Source: "ota", Key: "evt_9", BusinessKey: "B5", BusinessWindow: time.Hour, Now: clock.Now()})
	if err != nil || len(probe) != 1 || probe[0].Other != fifth.ID {
		t.Fatalf("would flag = %+v, %v; want the pending business key of delivery %d", probe, err, fifth.ID)
	}
	late := recordOne(t, db, forensicDelivery("ota", "evt_6", "B5", "C6"))
	f, err := db.FlagsOf(ctx, late.ID)
	if err != nil || len(f.Suspects) != 1 || f.Suspects[0].Other != fifth.ID {
		t.Fatalf("flags of %d = %+v, %v; want the business key of delivery %d", late.ID, f, err, fifth.ID)
	}
}

// A delivery recorded through another handle on the same file (another process) is
// matched once its transaction has committed: the writer reloads its copy of the
// pending keys when another connection has written.
func TestDB_ForensicKeys_AnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	a := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(a)
	recordOne(t, a, forensicDelivery("ota", "evt_0", "B0", "C0")) // a's writer has loaded its copy
	b := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(b)
	first := recordOne(t, b, forensicDelivery("ota", "evt_1", "B1", "C1"))
	again := recordOne(t, a, forensicDelivery("ota", "evt_2", "B1", "C9"))
	if !flagged(again, storage.SuspectBusinessKey) {
		t.Fatalf("a key another handle stored: flags %v, want a business key (of delivery %d)", again.Suspects, first.ID)
	}
}
