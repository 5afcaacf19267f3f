package enginetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestDB_ReleaseKeys releases more keys than one transaction takes, with keys still in
// flight among them: those are refused one by one and the rest go on, each released
// key with its audit row.
func TestReleaseKeys(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	dispatch := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}
	const stuck, busy = 230, 20 // stuck keys over several transactions, then keys in flight
	for i := range stuck {
		record(t, db, delivery("ota", fmt.Sprintf("stuck-%03d", i), "h"), dispatch)
	}
	clk.Add(time.Hour)
	for i := range busy {
		record(t, db, delivery("ota", fmt.Sprintf("busy-%03d", i), "h"), dispatch)
	}
	record(t, db, delivery("pms", "other-source", "h"), dispatch)
	rel := storage.Release{Actor: "sam", Reason: "downstream back", StuckBefore: clk.Now().Add(-10 * time.Minute)}

	out, err := db.ReleaseKeys(ctx, storage.KeyFilter{Source: "ota", State: storage.StateProcessing}, rel)
	if err != nil {
		t.Fatal(err)
	}
	changed, refused := 0, 0
	for _, o := range out {
		switch {
		case o.Changed && o.Refused == "" && o.Previous == storage.StateProcessing:
			changed++
		case !o.Changed && o.Refused == storage.RefusedBusy:
			refused++
		default:
			t.Errorf("outcome %+v", o)
		}
	}
	if len(out) != stuck+busy || changed != stuck || refused != busy {
		t.Fatalf("%d outcomes, %d released, %d refused; want %d, %d, %d", len(out), changed, refused, stuck+busy, stuck, busy)
	}
	for _, k := range []struct{ key, state string }{{"stuck-000", storage.StateReleased}, {"stuck-229", storage.StateReleased},
		{"busy-000", storage.StateProcessing}, {"busy-019", storage.StateProcessing}} {
		if c, err := db.Claim(ctx, "ota", k.key); err != nil || c.State != k.state {
			t.Errorf("%s: %s, %v; want %s", k.key, c.State, err, k.state)
		}
	}
	if c, _ := db.Claim(ctx, "pms", "other-source"); c.State != storage.StateProcessing {
		t.Errorf("another source's key: %s", c.State)
	}
	log, err := db.AuditLog(ctx, 0, 1000)
	if err != nil || len(log) != stuck {
		t.Fatalf("%d audit rows, %v; want one per released key (%d)", len(log), err, stuck)
	}
	if log[0].Action != "release" || log[0].Actor != "sam" || log[0].Reason != "downstream back" {
		t.Errorf("audit row %+v", log[0])
	}

}

// TestDB_ReleaseEach_Refusals: every way a release leaves a key as it was comes back
// as one of the fixed refusals, whose message names no internal detail, and ReleaseKey's
// errors map onto the same refusals.
func TestReleaseEach_Refusals(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	dispatch := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}
	record(t, db, delivery("ota", "stuck", "h"), dispatch)
	record(t, db, delivery("ota", "free", "h"), day)
	record(t, db, delivery("ota", "record-only", "h"), day)
	clk.Add(2 * time.Hour)
	record(t, db, delivery("ota", "busy", "h"), dispatch)
	rel := storage.Release{Actor: "sam", Reason: "downstream back", StuckBefore: clk.Now().Add(-10 * time.Minute)}
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "free", Actor: "sam", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	sweepAll(t, db, clk.Now().Add(-time.Hour), 100) // record-only's payload goes

	keys := []storage.KeyRef{{Source: "ota", Key: "stuck"}, {Source: "ota", Key: "free"}, {Source: "ota", Key: "busy"},
		{Source: "ota", Key: "missing"}}
	out, err := db.ReleaseEach(ctx, keys, rel)
	if err != nil {
		t.Fatal(err)
	}
	var refused []storage.Refusal
	for _, o := range out {
		refused = append(refused, o.Refused)
	}
	if want := []storage.Refusal{"", "", storage.RefusedBusy, storage.RefusedNotFound}; !slices.Equal(refused, want) {
		t.Errorf("refusals %q, want %q", refused, want)
	}
	want := storage.ReleaseSummary{Matched: 4, Changed: 1, Unchanged: 1, Refused: 2,
		Refusals: map[storage.Refusal]int{storage.RefusedBusy: 1, storage.RefusedNotFound: 1}}
	if got := storage.Summarize(out); !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}

	reprocess := rel
	reprocess.Reprocess = true
	out, err = db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "record-only"}}, reprocess)
	if err != nil || len(out) != 1 || out[0].Refused != storage.RefusedPayloadGone || out[0].Changed {
		t.Fatalf("reprocess without a payload: %+v, %v", out, err)
	}

	for key, want := range map[string]storage.Refusal{"busy": storage.RefusedBusy, "missing": storage.RefusedNotFound,
		"record-only": storage.RefusedPayloadGone} {
		r := reprocess
		r.Source, r.Key = "ota", key
		_, err := db.ReleaseKey(ctx, r)
		if got, ok := storage.RefusalOf(err); !ok || got != want {
			t.Errorf("ReleaseKey(%s): %v is refusal %q, %v; want %q", key, err, got, ok, want)
		}
		// The message is fixed: none of the error's own detail (times, delivery ids).
		if msg := want.Message(); strings.ContainsAny(msg, "0123456789") || strings.Contains(msg, key) {
			t.Errorf("message %q carries detail", msg)
		}
	}
	if _, ok := storage.RefusalOf(errors.New("database is locked")); ok {
		t.Error("a failure counts as a refusal")
	}
	if _, err := db.ReleaseEach(ctx, keys, storage.Release{Actor: "sam"}); err == nil {
		t.Error("a bulk release without a reason went ahead")
	}
}

// TestReleaseKey_FourEyes: a reprocess whose keys' money, read from the payloads it
// would send again, is above the thresholds is refused before any key changes, one key
// or a set (whose amounts add up); a release, which sends nothing, is not.
func TestReleaseKey_FourEyes(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	for _, k := range []struct{ key, amount, currency string }{
		{"small", "200.00", "EUR"}, {"also-small", "150.00", "EUR"}, {"big", "500.00", "EUR"},
		{"yen", "90000", "JPY"}, {"odd", "a lot", "EUR"},
	} {
		d := delivery("ota", k.key, "h")
		d.Amount, d.Currency = k.amount, k.currency
		record(t, db, d, day)
	}
	clk.Add(time.Minute)
	th := storage.ApprovalThresholds{"EUR": "300.00"}
	reprocess := storage.Release{Source: "ota", Actor: "sam", Reason: "downstream lost them", Reprocess: true,
		StuckBefore: clk.Now(), Thresholds: th}
	unchanged := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if c, err := db.Claim(ctx, "ota", k); err != nil || c.State != storage.StateProcessed {
				t.Errorf("%s is %s, %v after a refused reprocess; want processed", k, c.State, err)
			}
		}
	}
	needsApproval := func(err error, what string) {
		t.Helper()
		var na *storage.NeedsApprovalError
		if !errors.As(err, &na) || len(na.Over) == 0 {
			t.Errorf("%s: %v; want NeedsApprovalError", what, err)
		}
	}

	r := reprocess
	r.Key = "big"
	_, err := db.ReleaseKey(ctx, r)
	needsApproval(err, "reprocess of 500.00 EUR")
	r.Key = "odd"
	_, err = db.ReleaseKey(ctx, r)
	needsApproval(err, "reprocess of an amount that is no number")
	_, err = db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "small"}, {Source: "ota", Key: "also-small"},
		{Source: "ota", Key: "missing"}}, reprocess)
	needsApproval(err, "reprocess of 200.00 and 150.00 EUR together")
	unchanged("big", "odd", "small", "also-small")
	if log, err := db.AuditLog(ctx, 0, 10); err != nil || len(log) != 0 {
		t.Fatalf("audit log %+v, %v; want nothing written", log, err)
	}

	// Under the threshold, in a currency it does not name, or a release: no approval.
	out, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "small"}, {Source: "ota", Key: "yen"}}, reprocess)
	if err != nil || storage.Summarize(out).Changed != 2 {
		t.Fatalf("reprocess of 200.00 EUR and 90000 JPY: %+v, %v; want both queued", out, err)
	}
	rel := reprocess
	rel.Key, rel.Reprocess = "big", false
	if res, err := db.ReleaseKey(ctx, rel); err != nil || !res.Changed {
		t.Fatalf("release of the big key: %+v, %v; want released (nothing is sent)", res, err)
	}
}

// TestFourEyes_AddsUp: the reprocesses one operator makes without approval add up
// against the thresholds for storage.ReprocessWindow, one key at a time, as a set or as
// a bulk action, so that splitting a reprocess above a threshold does not go round
// four-eyes; another operator's count apart, and a reprocess approved by a second
// operator counts nothing.
func TestFourEyes_AddsUp(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	// A bulk reprocess is started by its requester, who must be an operator then.
	for _, name := range []string{"ann", "sam"} {
		createUser(t, db, name, storage.RoleOperator, "a password of some length")
	}
	for _, d := range []*storage.Delivery{
		moneyDelivery("ota", "a1", "400.00", "EUR", "p1"), moneyDelivery("ota", "a2", "-400.00", "EUR", "p1"),
		moneyDelivery("ota", "a3", "400.00", "EUR", "p1"), moneyDelivery("ota", "a4", "300.00", "EUR", "p1"),
		moneyDelivery("ota", "y1", "90000", "JPY", "p1"),
		moneyDelivery("ota", "b1", "250.00", "EUR", "pb"), moneyDelivery("ota", "b2", "250.00", "EUR", "pb"),
		moneyDelivery("ota", "c1", "250.00", "EUR", "pc"), moneyDelivery("ota", "c2", "250.00", "EUR", "pc"),
	} {
		record(t, db, d, day)
	}
	clk.Add(time.Minute)
	th := storage.ApprovalThresholds{"EUR": "1000.00"}
	by := func(actor, key string) storage.Release {
		return storage.Release{Source: "ota", Key: key, Actor: actor, Reason: "downstream lost it", Reprocess: true,
			StuckBefore: clk.Now(), Thresholds: th}
	}
	reprocessed := func(actor string, want ...storage.MoneyTotal) {
		t.Helper()
		got, err := db.ReprocessedBy(ctx, actor)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("reprocessed by %s: %+v, %v; want %+v", actor, got, err, want)
		}
	}

	if _, err := db.ReleaseKey(ctx, by("sam", "a1")); err != nil {
		t.Fatalf("sam reprocesses 400.00 EUR: %v", err)
	}
	if out, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "a2"}}, by("sam", "")); err != nil || storage.Summarize(out).Changed != 1 {
		t.Fatalf("sam reprocesses a refund of 400.00 EUR: %+v, %v", out, err)
	}
	reprocessed("sam", storage.MoneyTotal{Currency: "EUR", Keys: 2, Sum: "800.00", Gross: "800.00"})
	_, err := db.ReleaseKey(ctx, by("sam", "a3"))
	var na *storage.NeedsApprovalError
	if !errors.As(err, &na) || len(na.Over) != 1 || na.Over[0] != "EUR 1200.00 is above 1000.00, 800.00 of it reprocessed in the last 24 hours" {
		t.Fatalf("sam's third reprocess of 400.00 EUR: %v; want it to need approval, 800.00 of it earlier", err)
	}
	if c, _ := db.Claim(ctx, "ota", "a3"); !c.UpdatedAt.Before(clk.Now()) {
		t.Errorf("a3 changed by a refused reprocess: %+v", c)
	}
	// In a currency without a threshold, and by another operator, it goes through.
	if _, err := db.ReleaseKey(ctx, by("sam", "y1")); err != nil {
		t.Errorf("sam reprocesses 90000 JPY: %v; want no approval (no JPY threshold)", err)
	}
	if _, err := db.ReleaseKey(ctx, by("ann", "a3")); err != nil {
		t.Errorf("ann reprocesses 400.00 EUR: %v; want no approval", err)
	}
	reprocessed("ann", storage.MoneyTotal{Currency: "EUR", Keys: 1, Sum: "400.00", Gross: "400.00"})

	// A bulk reprocess counts what its requester reprocessed, in its preview and at its
	// start; one started without approval counts towards the next.
	bulk := func(actor, property string) storage.BulkAction {
		t.Helper()
		a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkReprocess, Filter: storage.BulkFilter{Property: property},
			Reason: "downstream back", Actor: actor, StuckBefore: clk.Now(), Thresholds: th})
		if err != nil {
			t.Fatal(err)
		}
		if a, err = db.StartBulkAction(ctx, a.ID, actor, th); err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := bulk("ann", "pb"); a.NeedsApproval || a.State != storage.BulkQueued {
		t.Errorf("ann's bulk reprocess of 500.00 EUR after 400.00: %s, needs approval %v; want queued", a.State, a.NeedsApproval)
	}
	reprocessed("ann", storage.MoneyTotal{Currency: "EUR", Keys: 2, Sum: "900.00", Gross: "900.00"})
	if _, err := db.ReleaseKey(ctx, by("ann", "a4")); !errors.As(err, &na) {
		t.Errorf("ann reprocesses 300.00 EUR after 900.00: %v; want it to need approval", err)
	}
	if a := bulk("sam", "pc"); !a.NeedsApproval || a.State != storage.BulkPendingApproval {
		t.Errorf("sam's bulk reprocess of 500.00 EUR after 800.00: %s, needs approval %v; want pending approval", a.State, a.NeedsApproval)
	}
	reprocessed("sam", storage.MoneyTotal{Currency: "EUR", Keys: 2, Sum: "800.00", Gross: "800.00"},
		storage.MoneyTotal{Currency: "JPY", Keys: 1, Sum: "90000", Gross: "90000"})

	// A day on, what was reprocessed then counts no more.
	clk.Add(storage.ReprocessWindow)
	reprocessed("sam")
	if _, err := db.ReleaseKey(ctx, by("sam", "a4")); err != nil {
		t.Errorf("sam reprocesses 300.00 EUR a day later: %v; want no approval", err)
	}
	reprocessed("sam", storage.MoneyTotal{Currency: "EUR", Keys: 1, Sum: "300.00", Gross: "300.00"})
}

// TestFourEyes_ClaimedAnew: a key whose claim expired and was taken over by a delivery
// of another amount between the four-eyes check's read of its money and the release's
// transaction is refused as in flight, by key and in a set, and nothing of the new
// amount goes out unchecked; tried again, the release checks the new amount.
func TestFourEyes_ClaimedAnew(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, moneyDelivery("ota", "k1", "100.00", "EUR", "p1"), day)
	record(t, db, moneyDelivery("ota", "k2", "100.00", "EUR", "p1"), day)
	clk.Add(25 * time.Hour) // both claims expired
	rel := storage.Release{Source: "ota", Key: "k1", Actor: "sam", Reason: "downstream lost it", Reprocess: true,
		StuckBefore: clk.Now(), Thresholds: storage.ApprovalThresholds{"EUR": "1000.00"}}
	takeOver := func(key string) func() {
		return func() {
			e.SetMoneyRead(db, nil)
			if d := record(t, db, moneyDelivery("ota", key, "5000.00", "EUR", "p1"), day); d.Outcome != storage.Accepted {
				t.Fatalf("delivery of %s after its claim expired: %s; want it to take the key over", key, d.Outcome)
			}
		}
	}
	claimedBy := func(key string) int64 {
		t.Helper()
		c, err := db.Claim(ctx, "ota", key)
		if err != nil {
			t.Fatal(err)
		}
		return c.FirstDelivery
	}
	e.SetMoneyRead(db, takeOver("k1"))
	before := claimedBy("k2")
	_, err := db.ReleaseKey(ctx, rel)
	if !errors.Is(err, storage.ErrBusy) || !strings.Contains(err.Error(), "claimed anew") {
		t.Fatalf("reprocess of k1, taken over since its 100.00 EUR were checked: %v; want it refused as claimed anew", err)
	}
	if c, err := db.Claim(ctx, "ota", "k1"); err != nil || c.State != storage.StateProcessed {
		t.Fatalf("k1 after the refusal: %+v, %v; want it as the takeover left it", c, err)
	}
	if got, err := db.ReprocessedBy(ctx, "sam"); err != nil || len(got) != 0 {
		t.Errorf("reprocessed by sam after a refusal: %+v, %v; want nothing", got, err)
	}
	var na *storage.NeedsApprovalError
	if _, err := db.ReleaseKey(ctx, rel); !errors.As(err, &na) {
		t.Fatalf("reprocess of k1 tried again: %v; want its 5000.00 EUR to need approval", err)
	}

	e.SetMoneyRead(db, takeOver("k2"))
	out, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "k2"}}, rel)
	if err != nil || len(out) != 1 || out[0].Refused != storage.RefusedBusy {
		t.Fatalf("set with k2, taken over since its money was checked: %+v, %v; want k2 refused as busy", out, err)
	}
	if after := claimedBy("k2"); after == before {
		t.Fatalf("k2 still claimed by delivery %d: the takeover did not happen", after)
	}
	if _, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "k2"}}, rel); !errors.As(err, &na) {
		t.Fatalf("set with k2 tried again: %v; want its 5000.00 EUR to need approval", err)
	}

	// A key no claim held when its money was read, claimed before the release.
	e.SetMoneyRead(db, takeOver("new"))
	rel.Key = "new"
	if _, err := db.ReleaseKey(ctx, rel); !errors.Is(err, storage.ErrBusy) {
		t.Fatalf("reprocess of a key claimed since its money was read (none): %v; want it refused as claimed anew", err)
	}

	// A key of a later batch of a set (a transaction takes 50), taken over before it.
	var set []storage.KeyRef
	for i := range 51 {
		key := fmt.Sprintf("s%02d", i)
		record(t, db, moneyDelivery("ota", key, "1.00", "EUR", "p2"), day)
		set = append(set, storage.KeyRef{Source: "ota", Key: key})
	}
	clk.Add(25 * time.Hour)
	e.SetMoneyRead(db, takeOver("s50"))
	out, err = db.ReleaseEach(ctx, set, rel)
	if err != nil || len(out) != 51 {
		t.Fatalf("set of 51: %d outcomes, %v", len(out), err)
	}
	for i, o := range out {
		if want := storage.Refusal(""); i == 50 && o.Refused != storage.RefusedBusy || i < 50 && (o.Refused != want || !o.Changed) {
			t.Errorf("set of 51, %s: %+v; want it reprocessed, or refused as claimed anew for s50", o.Key, o)
		}
	}
}

// TestFourEyes_AtOnce: reprocesses of one operator sent at once, each under the
// threshold and together above it, pass only as far as the threshold allows: each is
// checked against the others that went before it, never beside them.
func TestFourEyes_AtOnce(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	const n = 8
	for i := range n {
		record(t, db, moneyDelivery("ota", fmt.Sprintf("k%d", i), "400.00", "EUR", "p1"), day)
	}
	clk.Add(time.Minute)
	th := storage.ApprovalThresholds{"EUR": "1000.00"}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: fmt.Sprintf("k%d", i), Actor: "sam",
				Reason: "downstream lost it", Reprocess: true, StuckBefore: clk.Now(), Thresholds: th})
		})
	}
	wg.Wait()
	passed := 0
	for i, err := range errs {
		var na *storage.NeedsApprovalError
		switch {
		case err == nil:
			passed++
		case !errors.As(err, &na):
			t.Errorf("k%d: %v; want done or NeedsApprovalError", i, err)
		}
	}
	if passed != 2 {
		t.Errorf("%d reprocesses of 400.00 EUR at once went through; want 2 (800.00 of 1000.00)", passed)
	}
	if got, err := db.ReprocessedBy(ctx, "sam"); err != nil || len(got) != 1 || got[0].Gross != "800.00" {
		t.Errorf("reprocessed by sam: %+v, %v; want EUR 800.00", got, err)
	}
}

// TestReleaseEach_Replicas: two replicas release the same keys at once, in opposite
// orders: each key is released once, by one of them, with one audit row; the other
// finds it free.
func TestReleaseEach_Replicas(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	const n = 120
	keys := make([]storage.KeyRef, n)
	batch := make([]*storage.Delivery, n)
	for i := range n {
		keys[i] = storage.KeyRef{Source: "ota", Key: fmt.Sprintf("k%03d", i)}
		batch[i] = delivery("ota", keys[i].Key, "h")
	}
	if err := a.RecordBatch(ctx, batch, day); err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(keys)
	slices.Reverse(reversed)
	rel := storage.Release{Actor: "sam", Reason: "downstream lost them"}
	var outs [2][]storage.KeyOutcome
	var errs [2]error
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Go(func() { <-start; outs[0], errs[0] = a.ReleaseEach(ctx, keys, rel) })
	wg.Go(func() { <-start; outs[1], errs[1] = b.ReleaseEach(ctx, reversed, rel) })
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	sa, sb := storage.Summarize(outs[0]), storage.Summarize(outs[1])
	if sa.Refused+sb.Refused != 0 || sa.Changed+sb.Changed != n || sa.Unchanged+sb.Unchanged != n {
		t.Fatalf("replicas released %+v and %+v; want each key released once in all, and found free once", sa, sb)
	}
	log, err := a.AuditLog(ctx, 0, 10*n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, row := range log {
		seen[row.Key]++
	}
	if len(log) != n || len(seen) != n {
		t.Fatalf("%d audit rows for %d keys; want one per key (%d)", len(log), len(seen), n)
	}
}

// TestReleaseKey_ExpiredFailed: a failed key past its ttl is still stuck (listed, never
// swept), so a release frees it, audited; one settled and past its ttl is already
// free, and a release changes nothing when it left nothing to forget. A bulk release
// takes both, as releasing each alone does, and counts the settled one expired.
func TestReleaseKey_ExpiredFailed(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	for _, k := range []string{"failed", "processed"} {
		record(t, db, delivery("ota", k, "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	}
	for _, j := range lease(t, db, clk.Now(), time.Minute, 10) {
		res := storage.AttemptResult{Done: true}
		if j.Key == "failed" {
			res = storage.AttemptResult{Failed: true, LastError: "downstream refused it"}
		}
		if _, err := db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, StartedAt: clk.Now()}, res); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(2 * time.Hour)
	stuck := storage.KeyFilter{Stuck: true, StuckBefore: clk.Now()}
	if page, err := db.Keys(ctx, stuck); err != nil || len(page.Keys) != 1 || page.Keys[0].Key != "failed" {
		t.Fatalf("stuck keys past their ttl: %+v, %v; want the failed one", page.Keys, err)
	}
	preview, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{Source: "ota"},
		Reason: "r", Actor: "ann", StuckBefore: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if preview.Total != 2 || preview.Expired != 1 || len(preview.LeftOut) != 0 {
		t.Errorf("bulk release preview: %d keys, %d expired, left out %v; want both, the processed one expired",
			preview.Total, preview.Expired, preview.LeftOut)
	}

	rel := storage.Release{Source: "ota", Key: "failed", Actor: "sam", Reason: "downstream fixed", StuckBefore: clk.Now()}
	out, err := db.ReleaseKey(ctx, rel)
	if err != nil || !out.Changed || out.Previous != storage.StateFailed {
		t.Fatalf("release of a failed key past its ttl: %+v, %v; want changed, previously failed", out, err)
	}
	if c, _ := db.Claim(ctx, "ota", "failed"); c.State != storage.StateReleased {
		t.Errorf("after the release the key is %s", c.State)
	}
	if page, err := db.Keys(ctx, stuck); err != nil || len(page.Keys) != 0 {
		t.Errorf("stuck keys after the release: %+v, %v; want none", page.Keys, err)
	}
	log, err := db.AuditLog(ctx, 0, 10)
	if err != nil || len(log) == 0 || log[0].Action != "release" || log[0].Key != "failed" || log[0].PreviousState != storage.StateFailed {
		t.Errorf("audit: %+v, %v; want the release of the failed key, previously failed", log, err)
	}
	rel.Key = "processed"
	if out, err := db.ReleaseKey(ctx, rel); err != nil || out.Changed || out.Previous != "expired" {
		t.Errorf("release of a processed key past its ttl: %+v, %v; want unchanged, expired", out, err)
	}
}

// TestReleaseKey_ReprocessKeepsTTL: a reprocess of an expired key holds it for the
// window it was claimed for, however often the key is reprocessed; once a delivery
// takes the key over, the window is that claim's.
func TestReleaseKey_ReprocessKeepsTTL(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	settle := func() {
		t.Helper()
		j := leaseOne(t, db, clk.Now())
		if _, err := db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, StartedAt: clk.Now()},
			storage.AttemptResult{Done: true}); err != nil {
			t.Fatal(err)
		}
	}
	reprocess := func(want time.Duration) {
		t.Helper()
		if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k", Actor: "sam", Reason: "downstream lost it",
			Reprocess: true, StuckBefore: clk.Now()}); err != nil {
			t.Fatal(err)
		}
		c, err := db.Claim(ctx, "ota", "k")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ExpiresAt.Sub(clk.Now()); got != want {
			t.Errorf("reprocessed at %s, the key is held for %s; want %s", clk.Now().Format(time.RFC3339), got, want)
		}
	}

	record(t, db, delivery("ota", "k", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	settle()
	for _, age := range []time.Duration{2 * time.Hour, 5 * time.Hour, 30 * time.Hour} {
		clk.Add(age)
		reprocess(time.Hour)
		settle()
	}
	// Reprocessed while the claim still holds the key, its expiry stays.
	clk.Add(10 * time.Minute)
	reprocess(50 * time.Minute)
	settle()

	// A new claim of the key, taken over past its expiry, has a window of its own.
	clk.Add(2 * time.Hour)
	if rec := record(t, db, delivery("ota", "k", "h2"), storage.ClaimOptions{TTL: 20 * time.Minute, Dispatch: true}); rec.Outcome != storage.Accepted {
		t.Fatalf("delivery after the claim expired: %s; want accepted", rec.Outcome)
	}
	settle()
	clk.Add(time.Hour)
	reprocess(20 * time.Minute)
}
