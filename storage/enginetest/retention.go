package enginetest

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// retentionFixture is a database holding a delivery of each kind that retention must
// keep or may delete, received two hours before its clock's now.
type retentionFixture struct {
	db          storage.Store
	clk         *Clock
	kept, swept map[string]*storage.Delivery
}

func newRetentionFixture(t *testing.T, e Engine) retentionFixture {
	t.Helper()
	db := e.Open(t)
	clk := newClock(e, db)
	dispatch := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}
	f := retentionFixture{db: db, clk: clk, kept: map[string]*storage.Delivery{}, swept: map[string]*storage.Delivery{}}

	// Owed: unsettled, or handed downstream and still held (a reprocess resends it).
	f.kept["processing"] = record(t, db, delivery("ota", "processing", "h1"), dispatch)
	f.kept["failed"] = record(t, db, delivery("ota", "failed", "h"), dispatch)
	handOff(t, db, "failed", storage.AttemptResult{Failed: true, LastError: "downstream answered 500"})
	f.kept["handed"] = record(t, db, delivery("ota", "handed", "h"), dispatch)
	handOff(t, db, "handed", storage.AttemptResult{Done: true})

	// Not owed: the key expired or was released, it was never to be handed downstream,
	// or the delivery is not the one a claim names.
	f.swept["handed-expired"] = record(t, db, delivery("ota", "handed-expired", "h"),
		storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	handOff(t, db, "handed-expired", storage.AttemptResult{Done: true})
	f.swept["released"] = record(t, db, delivery("ota", "released", "h"), dispatch)
	handOff(t, db, "released", storage.AttemptResult{Done: true})
	if _, err := db.ReleaseKey(context.Background(), storage.Release{Source: "ota", Key: "released", Actor: "t", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	f.swept["record-only"] = record(t, db, delivery("ota", "record-only", "h"), day)
	f.swept["duplicate"] = record(t, db, delivery("ota", "processing", "h2"), dispatch)
	f.swept["rejected"] = record(t, db, &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401,
		Error: "signature does not match", Body: []byte(`{}`)}, day)

	clk.Add(2 * time.Hour)
	// Within retention: kept whatever its key.
	f.kept["recent"] = record(t, db, delivery("ota", "recent", "h"), day)
	return f
}

func (f retentionFixture) sweep(t *testing.T) int64 {
	t.Helper()
	// Two a batch: the walk steps over the owed deliveries among those it may delete.
	return sweepAll(t, f.db, f.clk.Now().Add(-time.Hour), 2)
}

// TestDB_SweepDeliveries_KeepsOwedPayloads: retention shorter than the time a key
// stays unsettled, or than its ttl, never deletes the payload its claim still owes
// downstream, and still deletes everything else past retention.
func TestSweepDeliveries_KeepsOwedPayloads(t *testing.T, e Engine) {
	ctx := context.Background()
	f := newRetentionFixture(t, e)
	if n := f.sweep(t); n != int64(len(f.swept)) {
		t.Errorf("swept %d deliveries, want %d", n, len(f.swept))
	}
	for name, d := range f.kept {
		got, err := f.db.Delivery(ctx, d.ID)
		if err != nil || string(got.Body) != string(d.Body) {
			t.Errorf("%s (delivery %d): %v, body %q; want kept with %q", name, d.ID, err, got.Body, d.Body)
		}
	}
	for name, d := range f.swept {
		if _, err := f.db.Delivery(ctx, d.ID); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("%s (delivery %d): %v, want swept", name, d.ID, err)
		}
	}
	// A delivery's attempts go with it: the downstream's answers they quote are kept no
	// longer than the delivery; an owed delivery's stay.
	attempts := func(key string) int {
		t.Helper()
		as, err := f.db.Attempts(ctx, "ota", key)
		if err != nil {
			t.Fatal(err)
		}
		return len(as)
	}
	for _, key := range []string{"handed-expired", "released"} {
		if n := attempts(key); n != 0 {
			t.Errorf("%s: %d attempts left after its delivery was swept, want none", key, n)
		}
	}
	for _, key := range []string{"failed", "handed"} {
		if n := attempts(key); n != 1 {
			t.Errorf("%s: %d attempts with its delivery kept, want 1", key, n)
		}
	}

	// Once the handed-off key's ttl is over, nothing is owed for it any more.
	f.clk.Add(24 * time.Hour)
	if n := f.sweep(t); n != 2 {
		t.Errorf("a day later swept %d, want 2 (the handed-off key's payload and the recent one)", n)
	}
	if _, err := f.db.Delivery(ctx, f.kept["handed"].ID); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("handed-off key past its ttl: %v, want swept", err)
	}
	for _, name := range []string{"processing", "failed"} {
		if _, err := f.db.Delivery(ctx, f.kept[name].ID); err != nil {
			t.Errorf("%s, a day later: %v; unsettled keys keep their payload", name, err)
		}
	}
}

// TestDB_ReleaseKey_PayloadGone: a key whose payload retention removed cannot be
// reprocessed, and says why; it can still be released.
func TestReleaseKey_PayloadGone(t *testing.T, e Engine) {
	ctx := context.Background()
	f := newRetentionFixture(t, e)
	f.sweep(t)
	reprocess := storage.Release{Source: "ota", Actor: "sam", Reason: "downstream lost it", Reprocess: true,
		StuckBefore: f.clk.Now().Add(-10 * time.Minute)}

	for _, key := range []string{"released", "handed-expired", "record-only"} {
		before, err := f.db.Claim(ctx, "ota", key)
		if err != nil {
			t.Fatal(err)
		}
		r := reprocess
		r.Key = key
		_, err = f.db.ReleaseKey(ctx, r)
		if !errors.Is(err, storage.ErrPayloadGone) || !strings.Contains(err.Error(), "no longer stored") ||
			!strings.Contains(err.Error(), "release the key instead") {
			t.Errorf("reprocess %s: %v; want ErrPayloadGone saying why and what to do", key, err)
		}
		if after, _ := f.db.Claim(ctx, "ota", key); after.State != before.State {
			t.Errorf("refused reprocess of %s moved it from %s to %s", key, before.State, after.State)
		}
	}
	log, err := f.db.AuditLog(ctx, 0, 100)
	if err != nil || len(log) != 1 || log[0].Key != "released" {
		t.Fatalf("audit log %+v, %v; want only the fixture's release", log, err)
	}

	r := reprocess
	r.Key = "handed"
	if res, err := f.db.ReleaseKey(ctx, r); err != nil || !res.Changed {
		t.Fatalf("reprocess of a held key: %+v, %v", res, err)
	}
	r = reprocess
	r.Key, r.Reprocess = "record-only", false
	if res, err := f.db.ReleaseKey(ctx, r); err != nil || !res.Changed {
		t.Fatalf("release of a key without its payload: %+v, %v", res, err)
	}
}

// TestDeliveriesKept: of a list of deliveries, those retention swept (and ids that
// never were) are not kept; the rest are, however many the list names and whatever
// their order or repeats.
func TestDeliveriesKept(t *testing.T, e Engine) {
	ctx := context.Background()
	f := newRetentionFixture(t, e)
	f.sweep(t)
	var ids []int64
	want := map[int64]bool{}
	for _, d := range f.kept {
		ids = append(ids, d.ID, d.ID)
		want[d.ID] = true
	}
	for _, d := range f.swept {
		ids = append(ids, d.ID)
	}
	ids = append(ids, 1<<40, 0, -1)
	got, err := f.db.DeliveriesKept(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("kept = %v, want %v", got, want)
	}
	if got, err := f.db.DeliveriesKept(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("kept of none = %v, %v; want none", got, err)
	}
}
