package enginetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestRecord(t *testing.T, e Engine) {
	ctx := context.Background()
	t.Run("FirstIsAcceptedNextIsDuplicate", func(t *testing.T) {
		db := e.Open(t)
		first := record(t, db, delivery("ota", "evt_1", "h1"), day)
		if first.Outcome != storage.Accepted || first.ID == 0 || first.FirstDelivery != first.ID || first.Status != 200 {
			t.Fatalf("first = %+v, want accepted with an id", first)
		}
		dup := record(t, db, delivery("ota", "evt_1", "h1"), day)
		if dup.Outcome != storage.Duplicate || dup.FirstDelivery != first.ID || dup.Mismatch {
			t.Fatalf("dup = outcome %s first %d mismatch %v, want duplicate of %d without mismatch",
				dup.Outcome, dup.FirstDelivery, dup.Mismatch, first.ID)
		}
		got, err := db.Delivery(ctx, dup.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Outcome != storage.Duplicate || got.FirstDelivery != first.ID || got.Status != 200 || string(got.Body) != `{"id":"evt_1"}` {
			t.Fatalf("stored duplicate = %+v", got)
		}
	})
	t.Run("DifferentPayloadIsMismatch", func(t *testing.T) {
		db := e.Open(t)
		record(t, db, delivery("ota", "evt_1", "h1"), day)
		dup := record(t, db, delivery("ota", "evt_1", "h2"), day)
		if dup.Outcome != storage.Duplicate || !dup.Mismatch {
			t.Fatalf("dup = %s mismatch %v, want duplicate with mismatch", dup.Outcome, dup.Mismatch)
		}
		c, err := countDeliveries(ctx, db, "ota")
		if err != nil {
			t.Fatal(err)
		}
		if c != (counts{Accepted: 1, Duplicate: 1, Mismatch: 1}) {
			t.Fatalf("counts = %+v", c)
		}
	})
	t.Run("KeysAreScopedBySource", func(t *testing.T) {
		db := e.Open(t)
		a := record(t, db, delivery("ota", "evt_1", "h1"), day)
		b := record(t, db, delivery("payments", "evt_1", "h1"), day)
		if a.Outcome != storage.Accepted || b.Outcome != storage.Accepted {
			t.Fatalf("outcomes = %s, %s; want both accepted", a.Outcome, b.Outcome)
		}
	})
	t.Run("RejectedIsStoredWithoutClaim", func(t *testing.T) {
		db := e.Open(t)
		d := &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 401, Error: "signature does not match"}
		record(t, db, d, day)
		got, err := db.Delivery(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Outcome != storage.Rejected || got.Status != 401 || got.Error != "signature does not match" {
			t.Fatalf("stored = %+v", got)
		}
		if _, err := db.Claim(ctx, "ota", ""); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("claim of a rejection: err = %v, want ErrNotFound", err)
		}
	})
	t.Run("DispatchStateFollowsOptions", func(t *testing.T) {
		db := e.Open(t)
		record(t, db, delivery("ota", "k1", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
		record(t, db, delivery("ota", "k2", "h"), storage.ClaimOptions{TTL: time.Hour})
		for key, want := range map[string]string{"k1": storage.StateProcessing, "k2": storage.StateProcessed} {
			c, err := db.Claim(ctx, "ota", key)
			if err != nil {
				t.Fatal(err)
			}
			if c.State != want {
				t.Errorf("%s state = %s, want %s", key, c.State, want)
			}
		}
	})
}

func TestRecord_Expired(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	ttl := storage.ClaimOptions{TTL: time.Hour}
	first := record(t, db, delivery("ota", "evt_1", "h1"), ttl)

	clk.Add(59 * time.Minute)
	if d := record(t, db, delivery("ota", "evt_1", "h1"), ttl); d.Outcome != storage.Duplicate {
		t.Fatalf("within the TTL: %s, want duplicate", d.Outcome)
	}
	// At expires_at exactly the row is expired: expires_at <= now. No sweep has run.
	clk.Add(time.Minute)
	again := record(t, db, delivery("ota", "evt_1", "h2"), ttl)
	if again.Outcome != storage.Accepted || again.ID == first.ID || again.Mismatch {
		t.Fatalf("after expiry: %+v, want a new accepted delivery", again)
	}
	c, err := db.Claim(ctx, "ota", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	if c.FirstDelivery != again.ID || c.PayloadHash != "h2" || !c.ExpiresAt.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("claim after takeover = %+v", c)
	}
	if d := record(t, db, delivery("ota", "evt_1", "h2"), ttl); d.Outcome != storage.Duplicate || d.FirstDelivery != again.ID {
		t.Fatalf("after takeover: %+v, want duplicate of %d", d, again.ID)
	}
}

func TestReleaseKey(t *testing.T, e Engine) {
	ctx := context.Background()
	t.Run("ReleasedKeyIsTakenOver", func(t *testing.T) {
		db := e.Open(t)
		record(t, db, delivery("ota", "evt_1", "h1"), day)
		res, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "sam", Reason: "refund reissued"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Changed || res.Previous != storage.StateProcessed {
			t.Fatalf("release = %+v", res)
		}
		d := record(t, db, delivery("ota", "evt_1", "h1"), day)
		if d.Outcome != storage.Accepted {
			t.Fatalf("after release: %s, want accepted", d.Outcome)
		}
		log, err := db.AuditLog(ctx, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(log) != 1 || log[0].Actor != "sam" || log[0].Action != "release" || log[0].Reason != "refund reissued" ||
			log[0].PreviousState != storage.StateProcessed || log[0].Key != "evt_1" {
			t.Fatalf("audit = %+v", log)
		}
	})
	t.Run("FreeKeyChangesNothing", func(t *testing.T) {
		db := e.Open(t)
		record(t, db, delivery("ota", "evt_1", "h1"), day)
		rel := storage.Release{Source: "ota", Key: "evt_1", Actor: "sam", Reason: "r"}
		if _, err := db.ReleaseKey(ctx, rel); err != nil {
			t.Fatal(err)
		}
		res, err := db.ReleaseKey(ctx, rel)
		if err != nil || res.Changed {
			t.Fatalf("second release = %+v, %v; want unchanged", res, err)
		}
		if log, _ := db.AuditLog(ctx, 0, 10); len(log) != 1 {
			t.Fatalf("audit rows = %d, want 1", len(log))
		}
	})
	t.Run("UnknownKey", func(t *testing.T) {
		db := e.Open(t)
		_, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "nope", Actor: "sam", Reason: "r"})
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("InFlightKeyIsRefused", func(t *testing.T) {
		db := e.Open(t)
		clk := newClock(e, db)
		record(t, db, delivery("ota", "evt_1", "h1"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
		rel := storage.Release{Source: "ota", Key: "evt_1", Actor: "sam", Reason: "r", StuckBefore: clk.Now().Add(-10 * time.Minute)}
		if _, err := db.ReleaseKey(ctx, rel); !errors.Is(err, storage.ErrBusy) {
			t.Fatalf("err = %v, want ErrBusy", err)
		}
		clk.Add(11 * time.Minute)
		rel.StuckBefore = clk.Now().Add(-10 * time.Minute)
		res, err := db.ReleaseKey(ctx, rel)
		if err != nil || !res.Changed {
			t.Fatalf("stuck key release = %+v, %v", res, err)
		}
	})
	t.Run("ReprocessKeepsTheClaim", func(t *testing.T) {
		db := e.Open(t)
		record(t, db, delivery("ota", "evt_1", "h1"), day)
		res, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "sam", Reason: "r", Reprocess: true})
		if err != nil || !res.Changed {
			t.Fatalf("reprocess = %+v, %v", res, err)
		}
		c, err := db.Claim(ctx, "ota", "evt_1")
		if err != nil {
			t.Fatal(err)
		}
		if c.State != storage.StateProcessing || c.NextAttemptAt.IsZero() {
			t.Fatalf("claim = %+v, want processing and due", c)
		}
		if d := record(t, db, delivery("ota", "evt_1", "h1"), day); d.Outcome != storage.Duplicate {
			t.Fatalf("after reprocess: %s, want duplicate", d.Outcome)
		}
	})
}

// recordConcurrently sends n deliveries of one key through dbs in turn, all at once.
func recordConcurrently(t *testing.T, n int, dbs ...storage.Store) (accepted, duplicates int64) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	var acc, dup atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d := delivery("ota", "evt_race", "h")
			if err := dbs[i%len(dbs)].Record(context.Background(), d, day); err != nil {
				t.Error(err)
				return
			}
			switch d.Outcome {
			case storage.Accepted:
				acc.Add(1)
			case storage.Duplicate:
				dup.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return acc.Load(), dup.Load()
}

func TestRecord_Concurrent(t *testing.T, e Engine) {
	ctx := context.Background()
	t.Run("OneHandle", func(t *testing.T) {
		db := e.Open(t)
		acc, dup := recordConcurrently(t, 200, db)
		if acc != 1 || dup != 199 {
			t.Fatalf("accepted %d, duplicates %d; want 1 and 199", acc, dup)
		}
		all, err := db.KeyDeliveries(ctx, "ota", "evt_race")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 200 {
			t.Fatalf("stored %d deliveries, want 200", len(all))
		}
	})
	t.Run("TwoHandlesOneDatabase", func(t *testing.T) {
		a := e.Open(t)
		b := e.Reopen(t, a)
		acc, dup := recordConcurrently(t, 200, a, b)
		if acc != 1 || dup != 199 {
			t.Fatalf("accepted %d, duplicates %d; want 1 and 199", acc, dup)
		}
		c, err := countDeliveries(ctx, b, "ota")
		if err != nil {
			t.Fatal(err)
		}
		if c.Accepted != 1 || c.Duplicate != 199 {
			t.Fatalf("stored counts = %+v", c)
		}
	})
}

func TestSweep(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	for i := range 25 {
		record(t, db, delivery("ota", fmt.Sprintf("k%d", i), "h"), storage.ClaimOptions{TTL: time.Minute})
	}
	// One key still owed downstream: the sweep must keep it even once expired.
	record(t, db, delivery("ota", "inflight", "h"), storage.ClaimOptions{TTL: time.Minute, Dispatch: true})
	record(t, db, delivery("ota", "long", "h"), storage.ClaimOptions{TTL: time.Hour})
	clk.Add(2 * time.Minute)

	var total int64
	for range 10 {
		n, err := db.SweepExpired(ctx, clk.Now(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if n > 10 {
			t.Fatalf("swept %d in one batch of 10", n)
		}
		total += n
		if n == 0 {
			break
		}
	}
	if total != 25 {
		t.Fatalf("swept %d claims, want 25", total)
	}
	for _, key := range []string{"inflight", "long"} {
		if _, err := db.Claim(ctx, "ota", key); err != nil {
			t.Errorf("claim %s after sweep: %v", key, err)
		}
	}

	// The key still owed downstream keeps its payload too.
	if n := sweepAll(t, db, clk.Now().Add(-time.Minute), 100); n != 26 {
		t.Fatalf("retention swept %d deliveries, want 26", n)
	}
}

// TestDB_SweepKeepsFailedClaims: a key whose hand-off failed is still owed downstream.
// Once its ttl has passed, the claims sweep must not delete it: it would leave the stuck
// list without an operator ever seeing it, and the retention sweep would then delete
// the only copy of its payload. A redelivery may still take it over, as it may any
// expired key that is not being handed downstream.
func TestSweepKeepsFailedClaims(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	d := record(t, db, delivery("ota", "evt_weekend", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	handOff(t, db, "evt_weekend", storage.AttemptResult{Failed: true, LastError: "downstream answered 503"})

	// The downstream was down over a weekend: the ttl passed before anyone looked.
	clk.Add(2 * time.Hour)
	if _, err := db.SweepExpired(ctx, clk.Now(), 1000); err != nil {
		t.Fatal(err)
	}
	sweepAll(t, db, clk.Now().Add(-time.Hour), 100)

	c, err := db.Claim(ctx, "ota", "evt_weekend")
	if err != nil {
		t.Fatalf("the failed key is gone after the claims sweep (%v): it no longer shows as stuck, and the event was never handed downstream", err)
	}
	if c.State != storage.StateFailed {
		t.Errorf("state %q, want failed", c.State)
	}
	if _, err := db.Delivery(ctx, d.ID); err != nil {
		t.Errorf("the failed key's payload was deleted: %v", err)
	}

	again := record(t, db, delivery("ota", "evt_weekend", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	if again.Outcome != storage.Accepted {
		t.Fatalf("a redelivery of the expired failed key: %s, want accepted (a takeover)", again.Outcome)
	}
	if c, err := db.Claim(ctx, "ota", "evt_weekend"); err != nil || c.State != storage.StateProcessing || c.FirstDelivery != again.ID {
		t.Fatalf("after the takeover: %+v %v, want processing from delivery %d", c, err, again.ID)
	}
}

func TestUsers(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	if _, err := db.CreateUser(ctx, storage.User{Name: "ana", Role: storage.RoleOperator, PasswordHash: "x"}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateUser(ctx, storage.User{Name: "ana", Role: storage.RoleViewer, PasswordHash: "y"}, "test"); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("duplicate user: err = %v, want ErrExists", err)
	}
	if _, err := db.CreateUser(ctx, storage.User{Name: "bo", Role: "root", PasswordHash: "y"}, "test"); err == nil {
		t.Fatal("unknown role accepted")
	}
	u, err := db.UserByName(ctx, "ana")
	if err != nil || u.Role != storage.RoleOperator || u.PasswordHash != "x" {
		t.Fatalf("user = %+v, %v", u, err)
	}
	if n, _ := db.CountUsers(ctx); n != 1 {
		t.Fatalf("users = %d, want 1", n)
	}
}

func TestSettingOrInit(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	v, err := db.SettingOrInit(ctx, "secret", func() (string, error) { return "first", nil })
	if err != nil || v != "first" {
		t.Fatalf("init = %q, %v", v, err)
	}
	other := e.Reopen(t, db)
	v, err = other.SettingOrInit(ctx, "secret", func() (string, error) { return "second", nil })
	if err != nil || v != "first" {
		t.Fatalf("second init = %q, %v; want the stored value", v, err)
	}
}

// TestSetSetting: a setting set is read back, by this connection and another, and
// setting it again replaces it; other settings are left as they were.
func TestSetSetting(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	if _, err := db.SettingOrInit(ctx, "other", func() (string, error) { return "kept", nil }); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2"} {
		if err := db.SetSetting(ctx, "mark", v); err != nil {
			t.Fatalf("set %q: %v", v, err)
		}
		if got, err := e.Reopen(t, db).Setting(ctx, "mark"); err != nil || got != v {
			t.Fatalf("after setting %q: read %q, %v", v, got, err)
		}
	}
	if got, err := db.Setting(ctx, "other"); err != nil || got != "kept" {
		t.Errorf("another setting: %q, %v; want it kept", got, err)
	}
}

func TestTokens(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	if _, _, err := db.CreateToken(ctx, "nobody", "ci", "admin"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("token for an unknown user: %v", err)
	}
	db.CreateUser(ctx, storage.User{Name: "vic", Role: storage.RoleViewer, PasswordHash: "x"}, "test")
	db.CreateUser(ctx, storage.User{Name: "wen", Role: storage.RoleViewer, PasswordHash: "x"}, "test")
	tok, meta, err := db.CreateToken(ctx, "vic", "dashboards", "admin")
	if err != nil {
		t.Fatal(err)
	}
	u, err := db.TokenUser(ctx, tok)
	if err != nil || u.Name != "vic" || u.Role != storage.RoleViewer {
		t.Fatalf("token user = %+v, %v", u, err)
	}
	if _, err := db.TokenUser(ctx, tok+"x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("altered token: %v", err)
	}
	// Revoking through its owner's account takes the owner's tokens only.
	if err := db.RevokeToken(ctx, meta.ID, "wen", "wen"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another user revoked vic's token: %v", err)
	}
	if err := db.RevokeToken(ctx, meta.ID, "vic", "vic"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TokenUser(ctx, tok); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("revoked token still works: %v", err)
	}
	if err := db.RevokeToken(ctx, meta.ID, "", "admin"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	if list, _ := db.Tokens(ctx, ""); len(list) != 1 || list[0].RevokedAt.IsZero() || list[0].UserName != "vic" {
		t.Fatalf("tokens = %+v", list)
	}
	if list, _ := db.Tokens(ctx, "wen"); len(list) != 0 {
		t.Fatalf("wen's tokens = %+v", list)
	}
	// Who made and who revoked it are in the audit log; the refusals are not.
	log, err := db.AuditLog(ctx, 0, 2)
	if err != nil || len(log) != 2 || log[0].Actor != "vic" || log[0].Action != "revoke token" ||
		log[0].Reason != `"dashboards" (id 1) of vic` || log[1].Actor != "admin" || log[1].Action != "create token" ||
		log[1].Reason != `"dashboards" (id 1) for vic` {
		t.Fatalf("audit = %+v, %v", log, err)
	}
}

// TestDB_Record_ExpiredButOwed: a key still owed downstream does not expire: taking it
// over would drop the first delivery's hand-off (or make two).
func TestRecord_ExpiredButOwed(t *testing.T, e Engine) {
	db := e.Open(t)
	clk := newClock(e, db)
	owed := storage.ClaimOptions{TTL: time.Minute, Dispatch: true}
	first := record(t, db, delivery("ota", "evt_1", "h1"), owed)
	clk.Add(2 * time.Minute)
	again := record(t, db, delivery("ota", "evt_1", "h1"), owed)
	if again.Outcome != storage.Duplicate || again.FirstDelivery != first.ID {
		t.Fatalf("after expiry, still processing: %s of %d, want a duplicate of %d", again.Outcome, again.FirstDelivery, first.ID)
	}
}
