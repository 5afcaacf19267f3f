package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// Another process (the release command, while serve runs) commits just as the writer
// begins a batch: after the writer last looked whether another connection had written,
// before its transaction holds the lock (the other's transaction held it, and the writer
// waited for it). The batch sees what the other committed: a business key the release
// forgot blocks nothing, and one the other stored blocks its double.
func TestDB_ForensicKeys_CommittedAsTheBatchBegins(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	blocks := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour, BusinessBlocks: true}
	a := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(a)
	if err := a.Record(ctx, bk("ota", "evt_1", "B1"), blocks); err != nil {
		t.Fatal(err)
	}
	b := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(b)
	other := bk("ota", "evt_3", "B3")
	var otherErr error
	done := false
	defer sqlite.SetBeforeBegin(func() {
		if done {
			return
		}
		done = true
		_, err := b.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "cli", Reason: "resent under a new id"})
		otherErr = errors.Join(err, b.Record(ctx, other, blocks))
	})()
	resent, double := bk("ota", "evt_2", "B1"), bk("ota", "evt_4", "B3")
	if err := a.RecordBatch(ctx, []*storage.Delivery{resent, double}, blocks); err != nil {
		t.Fatal(err)
	}
	if !done || otherErr != nil {
		t.Fatalf("the other process's writes: ran %v, %v", done, otherErr)
	}
	if resent.Outcome != storage.Accepted || len(resent.Suspects) != 0 {
		t.Errorf("a resend of a released key's event: %s, flags %v; want accepted, unflagged", resent.Outcome, resent.Suspects)
	}
	if double.Outcome != storage.Duplicate || double.FirstDelivery != other.ID {
		t.Errorf("a double of another process's delivery %d: %s of %d; want blocked as its duplicate",
			other.ID, double.Outcome, double.FirstDelivery)
	}
}

// A batch that loaded the other process's keys into the writer's copy, then failed for
// one request's own reason, rolled the copy back with it: the requests retried alone see
// the keys still, and a double of the other's delivery is blocked. The writer's filter
// of keys, in use before, is not trusted again after the rollback either.
func TestDB_ForensicKeys_LoadedByABatchRolledBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	blocks := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour, BusinessBlocks: true}
	a := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(a)
	poisonDeliveries(t, path)
	keyFilterInUse(t, a, 1)
	b := storagetest.OpenPath(t, path, sqlite.Options{})
	newClock(b)
	other := bk("ota", "evt_1", "B1")

	// The writer's first batch waits for the two requests to queue behind it; before the
	// second begins, the other process stores its delivery.
	entered, gate := make(chan struct{}), make(chan struct{})
	calls := 0
	var otherErr error
	defer sqlite.SetBeforeBegin(func() {
		calls++
		switch calls {
		case 1:
			close(entered)
			<-gate
		case 2:
			otherErr = b.Record(ctx, other, blocks)
		}
	})()
	var wg sync.WaitGroup
	var errs [3]error
	first, poison, double := bk("ota", "evt_0", "B0"), bk("ota", "poison", "B9"), bk("ota", "evt_2", "B1")
	wg.Go(func() { errs[0] = a.Record(ctx, first, blocks) })
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for range 10000 {
			if cond() {
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("waited too long for %s", what)
	}
	<-entered
	wg.Go(func() { errs[1] = a.Record(ctx, poison, blocks) })
	waitFor("the poisoned request to queue", func() bool { return a.QueuedRecords() == 1 })
	wg.Go(func() { errs[2] = a.Record(ctx, double, blocks) })
	waitFor("the double to queue", func() bool { return a.QueuedRecords() == 2 })
	close(gate)
	wg.Wait()
	if otherErr != nil || errs[0] != nil || errs[2] != nil {
		t.Fatalf("errors: other %v, first %v, double %v", otherErr, errs[0], errs[2])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "forced failure") {
		t.Fatalf("the poisoned request: %v, want the forced failure", errs[1])
	}
	if double.Outcome != storage.Duplicate || double.FirstDelivery != other.ID {
		t.Errorf("a double of another process's delivery %d: %s of %d; want blocked as its duplicate",
			other.ID, double.Outcome, double.FirstDelivery)
	}
}
