package enginetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// moneyDelivery is a delivery that carries an amount in a currency, for a property.
func moneyDelivery(source, key, amount, currency, property string) *storage.Delivery {
	d := delivery(source, key, "h-"+key)
	d.Amount, d.Currency, d.Property, d.EventStatus = amount, currency, property, "cancelled"
	return d
}

// bulkFixture records keys of several currencies, most of them stuck, and returns the
// time before which a processing key is stuck.
//
//	ota stuck:   EUR 100.10, EUR 200.25, EUR -50.05, JPY 5000, JPY 1234, one without an amount
//	ota:         EUR 999.00 processed (not stuck), EUR 10.00 in flight
//	pms stuck:   KWD 1.005, KWD 2.5, USD 7.25 (property p2)
func bulkFixture(t *testing.T, db storage.Store, clk *Clock) time.Time {
	t.Helper()
	dispatch := storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}
	for _, d := range []*storage.Delivery{
		moneyDelivery("ota", "e1", "100.10", "EUR", "p1"),
		moneyDelivery("ota", "e2", "200.25", "EUR", "p1"),
		moneyDelivery("ota", "e3", "-50.05", "EUR", "p1"),
		moneyDelivery("ota", "j1", "5000", "JPY", "p1"),
		moneyDelivery("ota", "j2", "1234", "JPY", "p1"),
		moneyDelivery("ota", "none", "", "", "p1"),
		moneyDelivery("pms", "k1", "1.005", "KWD", "p2"),
		moneyDelivery("pms", "k2", "2.5", "KWD", "p2"),
		moneyDelivery("pms", "u1", "7.25", "USD", "p2"),
	} {
		record(t, db, d, dispatch)
	}
	record(t, db, moneyDelivery("ota", "settled", "999.00", "EUR", "p1"), day)
	clk.Add(time.Hour)
	record(t, db, moneyDelivery("ota", "busy", "10.00", "EUR", "p1"), dispatch)
	return clk.Now().Add(-10 * time.Minute)
}

// TestDB_BulkPreview checks a preview's figures against a hand count of the fixture:
// the keys, and the money in each currency, never summed across currencies.
func TestBulkPreview(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	stuckBefore := bulkFixture(t, db, clk)
	for _, tt := range []struct {
		name     string
		kind     string
		filter   storage.BulkFilter
		total    int
		money    []storage.MoneyTotal
		noAmount int
		leftOut  map[string]int
	}{
		{"StuckOfOneSource", storage.BulkReprocess, storage.BulkFilter{Source: "ota", Stuck: true}, 6, []storage.MoneyTotal{
			{Currency: "EUR", Keys: 3, Sum: "250.30", Gross: "350.40"},
			{Currency: "JPY", Keys: 2, Sum: "6234", Gross: "6234"},
		}, 1, map[string]int{}},
		{"EverySourceAndState", storage.BulkRelease, storage.BulkFilter{}, 10, []storage.MoneyTotal{
			{Currency: "EUR", Keys: 4, Sum: "1249.30", Gross: "1349.40"},
			{Currency: "JPY", Keys: 2, Sum: "6234", Gross: "6234"},
			{Currency: "KWD", Keys: 2, Sum: "3.505", Gross: "3.505"},
			{Currency: "USD", Keys: 1, Sum: "7.25", Gross: "7.25"},
		}, 1, map[string]int{storage.LeftOutInFlight: 1}},
		{"AmountRangeInOneCurrency", storage.BulkReprocess, storage.BulkFilter{Stuck: true, Currency: "eur", AmountMin: "100", AmountMax: "200.25"}, 2,
			[]storage.MoneyTotal{{Currency: "EUR", Keys: 2, Sum: "300.35", Gross: "300.35"}}, 0, map[string]int{}},
		{"Property", storage.BulkReprocess, storage.BulkFilter{Property: "p2", Status: "cancelled"}, 3, []storage.MoneyTotal{
			{Currency: "KWD", Keys: 2, Sum: "3.505", Gross: "3.505"},
			{Currency: "USD", Keys: 1, Sum: "7.25", Gross: "7.25"},
		}, 0, map[string]int{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: tt.kind, Filter: tt.filter, Reason: "outage",
				Actor: "ann", StuckBefore: stuckBefore})
			if err != nil {
				t.Fatal(err)
			}
			if a.Total != tt.total || a.NoAmount != tt.noAmount || !reflect.DeepEqual(a.Money, tt.money) || !reflect.DeepEqual(a.LeftOut, tt.leftOut) {
				t.Errorf("preview: %d keys, money %+v, %d without amount, left out %v;\nwant %d, %+v, %d, %v",
					a.Total, a.Money, a.NoAmount, a.LeftOut, tt.total, tt.money, tt.noAmount, tt.leftOut)
			}
			got, err := db.BulkAction(ctx, a.ID)
			if err != nil || got.Total != a.Total || !reflect.DeepEqual(got.Money, a.Money) || got.State != storage.BulkPreview {
				t.Errorf("stored: %+v, %v", got, err)
			}
			keys, err := db.BulkKeys(ctx, a.ID, 1000)
			if err != nil || len(keys) != tt.total {
				t.Errorf("%d keys stored, %v; want %d", len(keys), err, tt.total)
			}
		})
	}
	t.Run("BadInput", func(t *testing.T) {
		for _, tt := range []struct {
			req  storage.BulkRequest
			want string
		}{
			{storage.BulkRequest{Kind: "delete", Reason: "x", Actor: "ann"}, `kind "delete"`},
			{storage.BulkRequest{Kind: storage.BulkRelease, Actor: "ann"}, "reason is required"},
			{storage.BulkRequest{Kind: storage.BulkRelease, Reason: "x", Actor: "ann", Filter: storage.BulkFilter{AmountMin: "1e3"}}, "amount_min"},
			{storage.BulkRequest{Kind: storage.BulkRelease, Reason: "x", Actor: "ann", Filter: storage.BulkFilter{State: "stuck"}}, `state "stuck"`},
			{storage.BulkRequest{Kind: storage.BulkRelease, Reason: "x", Actor: "ann", Filter: storage.BulkFilter{AmountMin: "5", AmountMax: "4"}}, "above amount_max"},
		} {
			if _, err := db.CreateBulkPreview(ctx, tt.req); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%+v: %v; want an error naming %q", tt.req, err, tt.want)
			}
		}
	})
}

// runAll runs action id's batches as runner until it is over; it returns the done
// counts after each batch.
// approveAndRun starts action a as ann, claims it as runner r1 and runs it to its end,
// and returns its id.
func approveAndRun(t *testing.T, db storage.Store, a storage.BulkAction, stuckBefore time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := db.StartBulkAction(ctx, a.ID, "ann", nil); err != nil {
		t.Fatal(err)
	}
	id, ok, err := db.ClaimBulkAction(ctx, "r1", time.Minute)
	if !ok || err != nil {
		t.Fatalf("claim the action: %v, %v", ok, err)
	}
	runAll(t, db, id, "r1", stuckBefore, 10)
	return id
}

func runAll(t *testing.T, db storage.Store, id int64, runner string, stuckBefore time.Time, n int) []int {
	t.Helper()
	var progress []int
	for range 100 {
		b, err := db.RunBulkBatch(context.Background(), id, runner, stuckBefore, n, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := db.BulkAction(context.Background(), id)
		progress = append(progress, a.Done)
		if b.Over {
			return progress
		}
	}
	t.Fatal("the action never ended")
	return nil
}

// TestDB_BulkFourEyes: a reprocess whose money is above its currency's threshold waits
// for approval; its requester can neither approve nor refuse it; a second operator's
// approval queues it, and it then reprocesses each key with its own audit row.
func TestBulkFourEyes(t *testing.T, e Engine) {
	ctx := context.Background()
	db, clk, req := fourEyesFixture(t, e)
	th, stuckBefore := req.Thresholds, req.StuckBefore
	a, err := db.CreateBulkPreview(ctx, req)
	if err != nil || !a.NeedsApproval {
		t.Fatalf("%+v, %v; want a preview that needs approval", a, err)
	}
	if _, err := db.StartBulkAction(ctx, a.ID, "bob", th); !errors.Is(err, storage.ErrNotRequester) {
		t.Errorf("started by another: %v", err)
	}
	if a, err = db.StartBulkAction(ctx, a.ID, "ann", th); err != nil || a.State != storage.BulkPendingApproval {
		t.Fatalf("start: %+v, %v", a, err)
	}
	if _, ok, _ := db.ClaimBulkAction(ctx, "r1", time.Minute); ok {
		t.Fatal("a runner took an action waiting for approval")
	}
	for _, decide := range []func(context.Context, int64, string, string) (storage.BulkAction, error){db.ApproveBulkAction, db.RefuseBulkAction} {
		if _, err := decide(ctx, a.ID, "ann", "looks fine"); !errors.Is(err, storage.ErrSelfApproval) {
			t.Errorf("decided by its requester: %v; want ErrSelfApproval", err)
		}
	}
	if _, err := db.ApproveBulkAction(ctx, a.ID, "bob", " "); err == nil {
		t.Error("approved without a reason")
	}
	if a, err = db.ApproveBulkAction(ctx, a.ID, "bob", "checked with finance"); err != nil || a.State != storage.BulkQueued || a.DecidedBy != "bob" {
		t.Fatalf("approve: %+v, %v", a, err)
	}
	id, ok, err := db.ClaimBulkAction(ctx, "r1", time.Minute)
	if err != nil || !ok || id != a.ID {
		t.Fatalf("claim: %d %v %v", id, ok, err)
	}
	if progress := runAll(t, db, id, "r1", stuckBefore, 4); !reflect.DeepEqual(progress, []int{4, 6, 6}) {
		t.Errorf("progress %v; want 4, 6, then done at 6", progress)
	}
	a, _ = db.BulkAction(ctx, id)
	if a.State != storage.BulkDone || a.Changed != 6 || a.FinishedAt.IsZero() {
		t.Errorf("finished: %+v", a)
	}
	log, _ := db.AuditLog(ctx, 0, 100)
	perKey := 0
	var actions []string
	for _, e := range log {
		if e.Action == "add user" {
			continue // the fixture's requester
		}
		actions = append(actions, e.Action)
		if e.Action == "reprocess" {
			perKey++
			if e.Actor != "ann" || !strings.Contains(e.Reason, fmt.Sprintf("downstream back (bulk action %d, approved by bob)", id)) {
				t.Errorf("key audit row %+v", e)
			}
		}
	}
	if perKey != 6 || actions[len(actions)-1] != "bulk start" || actions[len(actions)-2] != "bulk approve" {
		t.Errorf("audit actions %v; want bulk start, bulk approve, then one reprocess per key", actions)
	}
	if c, _ := db.Claim(ctx, "ota", "e1"); c.State != storage.StateProcessing || c.Attempts != 0 {
		t.Errorf("a reprocessed key: %+v", c)
	}

	t.Run("Refused", func(t *testing.T) {
		clk.Add(time.Hour)
		r := req
		r.StuckBefore = clk.Now().Add(-10 * time.Minute)
		a, err := db.CreateBulkPreview(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		db.StartBulkAction(ctx, a.ID, "ann", th)
		if a, err = db.RefuseBulkAction(ctx, a.ID, "bob", "not during the audit"); err != nil || a.State != storage.BulkRefused {
			t.Fatalf("refuse: %+v, %v", a, err)
		}
		if _, err := db.ApproveBulkAction(ctx, a.ID, "cat", "ok"); !errors.Is(err, storage.ErrBulkState) {
			t.Errorf("approved after a refusal: %v", err)
		}
		if _, ok, _ := db.ClaimBulkAction(ctx, "r1", time.Minute); ok {
			t.Error("a runner took a refused action")
		}
	})
	t.Run("RequesterNoLongerOperator", func(t *testing.T) {
		// Checked in the approval's own transaction: a check of the requester read
		// before it lets a demotion or removal that commits in between through, and
		// the action then runs under the name of someone who may no longer reprocess.
		for _, change := range []string{"demoted", "removed"} {
			clk.Add(time.Hour)
			name := "dan-" + change
			createUser(t, db, name, storage.RoleOperator, "a password of some length")
			r := req
			r.Actor, r.StuckBefore = name, clk.Now().Add(-10*time.Minute)
			a, err := db.CreateBulkPreview(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if a, err = db.StartBulkAction(ctx, a.ID, name, th); err != nil || a.State != storage.BulkPendingApproval {
				t.Fatalf("start: %+v, %v", a, err)
			}
			if change == "demoted" {
				_, err = db.SetUserRole(ctx, name, storage.RoleViewer, "admin")
			} else {
				err = db.DeleteUser(ctx, name, "admin")
			}
			if err != nil {
				t.Fatal(err)
			}
			var gone *storage.RequesterGoneError
			if _, err := db.ApproveBulkAction(ctx, a.ID, "bob", "checked"); !errors.As(err, &gone) || gone.Name != name {
				t.Errorf("%s: approved: %v; want a RequesterGoneError naming %s", change, err, name)
			}
			if got, _ := db.BulkAction(ctx, a.ID); got.State != storage.BulkPendingApproval || got.DecidedBy != "" {
				t.Errorf("%s: %+v; want it still waiting, undecided", change, got)
			}
			if a, err = db.RefuseBulkAction(ctx, a.ID, "bob", "asked again by a current operator"); err != nil || a.State != storage.BulkRefused {
				t.Errorf("%s: refuse: %+v, %v", change, a, err)
			}
		}
	})
	t.Run("ReleaseNeedsNoApproval", func(t *testing.T) {
		r := req
		r.Kind, r.Filter = storage.BulkRelease, storage.BulkFilter{Source: "pms"}
		a, err := db.CreateBulkPreview(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if a, err = db.StartBulkAction(ctx, a.ID, "ann", storage.ApprovalThresholds{"*": "0"}); err != nil || a.State != storage.BulkQueued {
			t.Errorf("%+v, %v", a, err)
		}
	})
}

// TestDB_BulkCancel cancels a running action between batches: the keys done stay done,
// the rest are left as they were. A key changed since the preview is skipped.
func TestBulkCancel(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	for i := range 10 {
		record(t, db, delivery("ota", fmt.Sprintf("k%02d", i), "h"), storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	}
	clk.Add(time.Hour)
	stuckBefore := clk.Now().Add(-10 * time.Minute)
	a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: storage.BulkFilter{Stuck: true},
		Reason: "outage", Actor: "ann", StuckBefore: stuckBefore})
	if err != nil || a.Total != 10 {
		t.Fatalf("%+v, %v", a, err)
	}
	// Settled by hand after the preview: the run must leave it alone.
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k00", Actor: "bob", Reason: "by hand", StuckBefore: stuckBefore}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.StartBulkAction(ctx, a.ID, "ann", nil); err != nil {
		t.Fatal(err)
	}
	id, ok, err := db.ClaimBulkAction(ctx, "r1", time.Minute)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := db.RunBulkBatch(ctx, id, "r1", stuckBefore, 3, time.Minute); err != nil {
		t.Fatal(err)
	}
	if a, err = db.CancelBulkAction(ctx, id, "bob", "wrong filter"); err != nil || a.State != storage.BulkRunning || !a.CancelRequested {
		t.Fatalf("cancel: %+v, %v", a, err)
	}
	b, err := db.RunBulkBatch(ctx, id, "r1", stuckBefore, 3, time.Minute)
	if err != nil || !b.Over {
		t.Fatalf("batch after cancel: %+v, %v", b, err)
	}
	a, _ = db.BulkAction(ctx, id)
	if a.State != storage.BulkCancelled || a.Done != 3 || a.Changed != 2 || a.Skipped != 1 || a.CancelledBy != "bob" {
		t.Errorf("cancelled: %+v; want 3 done, 2 released, 1 skipped", a)
	}
	released := 0
	for i := range 10 {
		c, _ := db.Claim(ctx, "ota", fmt.Sprintf("k%02d", i))
		if c.State == storage.StateReleased {
			released++
		}
	}
	if released != 3 { // two by the action, one by hand
		t.Errorf("%d keys released; want 3", released)
	}
	if _, err := db.CancelBulkAction(ctx, id, "bob", ""); !errors.Is(err, storage.ErrBulkState) {
		t.Errorf("cancel of a cancelled action: %v", err)
	}
}

// TestDB_BulkResume: a runner that stops (its process ended) loses the action when its
// lease runs out; another runner resumes it from the first key without an outcome, and
// the first one, if it comes back, is told the action is no longer its own.
func TestBulkResume(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	for i := range 7 {
		record(t, db, delivery("ota", fmt.Sprintf("k%d", i), "h"), storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	}
	clk.Add(time.Hour)
	stuckBefore := clk.Now().Add(-10 * time.Minute)
	a, _ := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkReprocess, Filter: storage.BulkFilter{Stuck: true},
		Reason: "outage", Actor: "ann", StuckBefore: stuckBefore})
	db.StartBulkAction(ctx, a.ID, "ann", nil)
	if _, ok, _ := db.ClaimBulkAction(ctx, "old", time.Minute); !ok {
		t.Fatal("no claim")
	}
	db.RunBulkBatch(ctx, a.ID, "old", stuckBefore, 3, time.Minute)
	if _, ok, _ := db.ClaimBulkAction(ctx, "new", time.Minute); ok {
		t.Fatal("taken over within the lease")
	}
	clk.Add(2 * time.Minute)
	if id, ok, _ := db.ClaimBulkAction(ctx, "new", time.Minute); !ok || id != a.ID {
		t.Fatal("not resumed once the lease ran out")
	}
	if b, err := db.RunBulkBatch(ctx, a.ID, "old", stuckBefore, 3, time.Minute); err != nil || !b.Over {
		t.Errorf("the old runner's batch: %+v, %v; want told it is over", b, err)
	}
	runAll(t, db, a.ID, "new", stuckBefore, 3)
	a, _ = db.BulkAction(ctx, a.ID)
	log, _ := db.AuditLog(ctx, 0, 100)
	reprocessed := 0
	for _, e := range log {
		if e.Action == "reprocess" {
			reprocessed++
		}
	}
	if a.State != storage.BulkDone || a.Changed != 7 || reprocessed != 7 {
		t.Errorf("%+v, %d audit rows; want each of 7 keys reprocessed once", a, reprocessed)
	}
}

// TestBulkOddText: a filter's text that no stored key can hold (a NUL byte, invalid
// UTF-8) matches nothing, a reason holding it is stored, and an actor's name holding
// it, no user's, is refused as such, on every engine, even one whose text refuses such
// bytes: the console gets an answer, never a failed query.
func TestBulkOddText(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	record(t, db, moneyDelivery("ota", "e1", "10.00", "EUR", "p1"), storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true})
	clk.Add(time.Hour)
	stuckBefore := clk.Now().Add(-10 * time.Minute)
	for _, tt := range []struct {
		field  string
		filter storage.BulkFilter
	}{
		{"source", storage.BulkFilter{Source: "ota\x00"}},
		{"property", storage.BulkFilter{Property: "p1\x00"}},
		{"booking", storage.BulkFilter{Booking: "\xff"}},
		{"status", storage.BulkFilter{Status: "can\x00celled"}},
		{"currency", storage.BulkFilter{Currency: "EU\x00R"}},
	} {
		a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: tt.filter, Reason: "outage",
			Actor: "ann", StuckBefore: stuckBefore})
		if err != nil || a.Total != 0 {
			t.Errorf("a %s of odd bytes: %d keys, %v; want none, and no error", tt.field, a.Total, err)
		}
	}
	th := storage.ApprovalThresholds{"EUR": "1.00"}
	a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkReprocess, Filter: storage.BulkFilter{Stuck: true},
		Reason: "out\x00age \xff", Actor: "ann", StuckBefore: stuckBefore, Thresholds: th})
	if err != nil || a.Total != 1 {
		t.Fatalf("preview with a NUL in its reason: %+v, %v", a, err)
	}
	if a, err = db.StartBulkAction(ctx, a.ID, a.RequestedBy, th); err != nil || a.State != storage.BulkPendingApproval {
		t.Fatalf("start: %+v, %v", a, err)
	}
	// No user has such a name: refused as one, never a failed query.
	var gone *storage.ActorGoneError
	if _, err := db.ApproveBulkAction(ctx, a.ID, "bob\x00", "fine"); !errors.As(err, &gone) || gone.Role != "" {
		t.Errorf("approve as an odd name: %v; want an ActorGoneError", err)
	}
	if a, err = db.ApproveBulkAction(ctx, a.ID, "bob", "fine\x00 \xff"); err != nil || a.State != storage.BulkQueued {
		t.Fatalf("approve: %+v, %v", a, err)
	}
	if _, err := db.CancelBulkAction(ctx, a.ID, "cat\xff", "not now"); !errors.As(err, &gone) || gone.Role != "" {
		t.Errorf("cancel as an odd name: %v; want an ActorGoneError", err)
	}
	if a, err = db.CancelBulkAction(ctx, a.ID, "cat", "not\x00 now"); err != nil || a.State != storage.BulkCancelled {
		t.Fatalf("cancel: %+v, %v", a, err)
	}
	if got, err := db.BulkAction(ctx, a.ID); err != nil || got.State != storage.BulkCancelled || got.DecisionReason == "" {
		t.Errorf("stored: %+v, %v", got, err)
	}
}

// TestBulkReasonCountsCharacters: a reason is bounded at storage.MaxReason characters,
// as the console's forms, the API and the command line count it, not in bytes: a reason
// of accented or Japanese text that they let through is stored whole, at every step of
// an action, and one a character too long is refused, saying so.
func TestBulkReasonCountsCharacters(t *testing.T, e Engine) {
	ctx := context.Background()
	db, _, req := fourEyesFixture(t, e)
	long, tooLong := strings.Repeat("é", storage.MaxReason), strings.Repeat("払", storage.MaxReason+1)
	req.Reason = tooLong
	if _, err := db.CreateBulkPreview(ctx, req); err == nil || !strings.Contains(err.Error(), "to 500 characters at most (it has 501)") {
		t.Errorf("preview with a reason of 501 characters: %v; want it refused, saying so", err)
	}
	req.Reason = long
	a, err := db.CreateBulkPreview(ctx, req)
	if err != nil || a.Reason != long {
		t.Fatalf("preview with a reason of 500 characters (1,000 bytes): %q, %v; want it stored whole", a.Reason, err)
	}
	if a, err = db.StartBulkAction(ctx, a.ID, "ann", req.Thresholds); err != nil || a.State != storage.BulkPendingApproval {
		t.Fatalf("start: %+v, %v", a, err)
	}
	for _, decide := range []func(context.Context, int64, string, string) (storage.BulkAction, error){db.ApproveBulkAction, db.RefuseBulkAction} {
		if _, err := decide(ctx, a.ID, "bob", tooLong); err == nil || !strings.Contains(err.Error(), "to 500 characters at most") {
			t.Errorf("decided with a reason of 501 characters: %v; want it refused, saying so", err)
		}
	}
	decision := strings.Repeat("€", storage.MaxReason)
	if a, err = db.ApproveBulkAction(ctx, a.ID, "bob", decision); err != nil || a.DecisionReason != decision {
		t.Fatalf("approved with a reason of 500 characters (1,500 bytes): %q, %v; want it stored whole", a.DecisionReason, err)
	}
	if _, err := db.CancelBulkAction(ctx, a.ID, "cat", tooLong); err == nil || !strings.Contains(err.Error(), "to 500 characters at most") {
		t.Errorf("cancelled with a reason of 501 characters: %v; want it refused, saying so", err)
	}
	if a, err = db.CancelBulkAction(ctx, a.ID, "cat", long); err != nil || a.State != storage.BulkCancelled {
		t.Errorf("cancelled with a reason of 500 characters: %+v, %v", a, err)
	}
}

// TestBulkActorGone: a step of an action (its start, approval, refusal or
// cancellation) taken by someone made a viewer or removed since the console or the API
// let them in is refused in the step's own transaction: checked only before it, a
// demotion or removal committed in between would let someone who may no longer act
// start a release that runs at once, decide, or cancel, under their name. Nothing of
// the step is written, audit row included; an operator or an admin still takes it.
func TestBulkActorGone(t *testing.T, e Engine) {
	ctx := context.Background()
	db, clk, req := fourEyesFixture(t, e)
	createUser(t, db, "ada", storage.RoleAdmin, "a password of some length")
	preview := func(by string) storage.BulkAction {
		t.Helper()
		r := req
		r.Actor = by
		a, err := db.CreateBulkPreview(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	pending := func(string) storage.BulkAction {
		t.Helper()
		a, err := db.StartBulkAction(ctx, preview("ann").ID, "ann", req.Thresholds)
		if err != nil || a.State != storage.BulkPendingApproval {
			t.Fatalf("start: %+v, %v", a, err)
		}
		return a
	}
	// running is an action a runner holds, asked by its requester to stop already or
	// not; a long lease keeps the runner's hold on the actions before it.
	running := func(asked bool) func(string) storage.BulkAction {
		return func(string) storage.BulkAction {
			t.Helper()
			a, err := db.StartBulkAction(ctx, preview("ann").ID, "ann", nil)
			if err != nil || a.State != storage.BulkQueued {
				t.Fatalf("start: %+v, %v", a, err)
			}
			if id, ok, err := db.ClaimBulkAction(ctx, "r1", time.Hour); !ok || err != nil || id != a.ID {
				t.Fatalf("claim: %d, %v, %v; want %d", id, ok, err, a.ID)
			}
			if asked {
				if a, err = db.CancelBulkAction(ctx, a.ID, "ann", "asked first"); err != nil || !a.CancelRequested {
					t.Fatalf("cancel: %+v, %v", a, err)
				}
			}
			return a
		}
	}
	start := func(id int64, actor string) (storage.BulkAction, error) {
		return db.StartBulkAction(ctx, id, actor, req.Thresholds)
	}
	decide := func(decide func(context.Context, int64, string, string) (storage.BulkAction, error)) func(int64, string) (storage.BulkAction, error) {
		return func(id int64, actor string) (storage.BulkAction, error) { return decide(ctx, id, actor, "checked") }
	}
	cancel := func(id int64, actor string) (storage.BulkAction, error) {
		return db.CancelBulkAction(ctx, id, actor, "checked")
	}
	cancelled := func(a storage.BulkAction) bool { return a.State == storage.BulkCancelled && a.CancelledBy == "ada" }
	stopping := func(a storage.BulkAction) bool { return a.State == storage.BulkRunning && a.CancelRequested }
	// The running ones first: a runner claims the oldest queued action, and an approval
	// queues one.
	for _, s := range []struct {
		name   string
		verb   string                                          // the ActorGoneError's
		action func(actor string) storage.BulkAction           // before the step
		take   func(int64, string) (storage.BulkAction, error) // the step, as actor
		// taken reports whether the step, taken by an admin, went through; nil when
		// only the actor may take it (a start is its requester's).
		taken func(storage.BulkAction) bool
	}{
		{"cancel running", "cancel", running(false), cancel, stopping},
		{"cancel stopping", "cancel", running(true), cancel, stopping},
		{"start", "start", preview, start, nil},
		{"approve", "approve or refuse", pending, decide(db.ApproveBulkAction),
			func(a storage.BulkAction) bool { return a.State == storage.BulkQueued && a.DecidedBy == "ada" }},
		{"refuse", "approve or refuse", pending, decide(db.RefuseBulkAction),
			func(a storage.BulkAction) bool { return a.State == storage.BulkRefused && a.DecidedBy == "ada" }},
		{"cancel preview", "cancel", preview, cancel, cancelled},
		{"cancel pending", "cancel", pending, cancel, cancelled},
	} {
		for _, change := range []string{"demoted", "removed"} {
			clk.Add(time.Minute)
			name := "dee-" + strings.ReplaceAll(s.name, " ", "-") + "-" + change
			createUser(t, db, name, storage.RoleOperator, "a password of some length")
			a := s.action(name)
			role := storage.RoleViewer
			var err error
			if change == "demoted" {
				_, err = db.SetUserRole(ctx, name, role, "ada")
			} else {
				role, err = "", db.DeleteUser(ctx, name, "ada")
			}
			if err != nil {
				t.Fatal(err)
			}
			before, err := db.BulkAction(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			audit, err := db.AuditLog(ctx, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			var gone *storage.ActorGoneError
			if _, err := s.take(a.ID, name); !errors.As(err, &gone) || gone.Verb != s.verb || gone.Name != name || gone.Role != role {
				t.Errorf("%s by one %s: %v; want an ActorGoneError for %q naming %s, role %q", s.name, change, err, s.verb, name, role)
			}
			if got, err := db.BulkAction(ctx, a.ID); err != nil || !reflect.DeepEqual(got, before) {
				t.Errorf("%s by one %s: %+v, %v; want it unchanged: %+v", s.name, change, got, err, before)
			}
			if after, err := db.AuditLog(ctx, 0, 1000); err != nil || len(after) != len(audit) {
				t.Errorf("%s by one %s: %d audit rows, %v; want %d, none added", s.name, change, len(after), err, len(audit))
			}
			if s.taken == nil {
				continue
			}
			if got, err := s.take(a.ID, "ada"); err != nil || !s.taken(got) {
				t.Errorf("%s by an admin: %+v, %v", s.name, got, err)
			}
		}
	}
}

// bulkActors creates the operators the tests take the steps of actions as (ann, bob and
// cat): each step is refused to a name that is no operator's now.
func bulkActors(t *testing.T, db storage.Store) {
	t.Helper()
	for _, name := range []string{"ann", "bob", "cat"} {
		createUser(t, db, name, storage.RoleOperator, "a password of some length")
	}
}

// fourEyesFixture opens a database holding bulkFixture's keys and returns the request
// of a reprocess of its stuck keys whose money is above its EUR threshold.
func fourEyesFixture(t *testing.T, e Engine) (storage.Store, *Clock, storage.BulkRequest) {
	t.Helper()
	db := e.Open(t)
	clk := newClock(e, db)
	stuckBefore := bulkFixture(t, db, clk)
	bulkActors(t, db)
	return db, clk, storage.BulkRequest{Kind: storage.BulkReprocess, Filter: storage.BulkFilter{Source: "ota", Stuck: true},
		Reason: "downstream back", Actor: "ann", StuckBefore: stuckBefore, Thresholds: storage.ApprovalThresholds{"EUR": "300.00"}}
}

// TestBulkStale: a preview made more than MaxPreviewAge ago can be neither started nor
// approved, its keys' states and money being a day old; it can still be refused and
// cancelled. Up to MaxPreviewAge it starts as usual.
func TestBulkStale(t *testing.T, e Engine) {
	ctx := context.Background()
	db, clk, req := fourEyesFixture(t, e)
	th := req.Thresholds
	fresh, err := db.CreateBulkPreview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	old, err := db.CreateBulkPreview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if old, err = db.StartBulkAction(ctx, old.ID, "ann", th); err != nil || old.State != storage.BulkPendingApproval {
		t.Fatalf("start: %+v, %v", old, err)
	}
	clk.Add(storage.MaxPreviewAge)
	if a, err := db.StartBulkAction(ctx, fresh.ID, "ann", nil); err != nil || a.State != storage.BulkQueued {
		t.Fatalf("start a preview exactly MaxPreviewAge old: %+v, %v", a, err)
	}
	if _, err := db.CancelBulkAction(ctx, fresh.ID, "ann", "not now"); err != nil {
		t.Fatal(err)
	}
	stale, err := db.CreateBulkPreview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Millisecond)
	if !old.Stale(clk.Now()) {
		t.Fatalf("Stale(%v) of an action created at %v = false", clk.Now(), old.CreatedAt)
	}
	if _, err := db.ApproveBulkAction(ctx, old.ID, "bob", "checked"); !errors.Is(err, storage.ErrPreviewStale) {
		t.Errorf("approve a start whose preview is stale: %v; want ErrPreviewStale", err)
	}
	if a, _ := db.BulkAction(ctx, old.ID); a.State != storage.BulkPendingApproval {
		t.Errorf("after a refused approval the action is %s, want it still awaiting approval", a.State)
	}
	if a, err := db.RefuseBulkAction(ctx, old.ID, "bob", "too old"); err != nil || a.State != storage.BulkRefused {
		t.Errorf("refuse a stale action: %+v, %v", a, err)
	}
	clk.Add(storage.MaxPreviewAge)
	if _, err := db.StartBulkAction(ctx, stale.ID, "ann", nil); !errors.Is(err, storage.ErrPreviewStale) {
		t.Errorf("start a stale preview: %v; want ErrPreviewStale", err)
	}
	if a, _ := db.BulkAction(ctx, stale.ID); a.State != storage.BulkPreview || !a.StartedAt.IsZero() {
		t.Errorf("a stale preview after a refused start: %+v", a)
	}
	if _, ok, _ := db.ClaimBulkAction(ctx, "r1", time.Minute); ok {
		t.Error("a runner took a stale action")
	}
}

// previewKeys makes a preview of a release of f, with the sources the tests record
// under configured, and returns it with its keys as "source/key", in order.
func previewKeys(t *testing.T, db storage.Store, f storage.BulkFilter) (storage.BulkAction, []string) {
	t.Helper()
	ctx := context.Background()
	a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: f, Reason: "check",
		Actor: "ann", KeySources: []string{"ota", "pms"}, StuckBefore: time.Unix(0, 0)})
	if err != nil {
		t.Fatalf("preview of %+v: %v", f, err)
	}
	keys, err := db.BulkKeys(ctx, a.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		out = append(out, k.Source+"/"+k.Key)
	}
	return a, out
}

// TestBulkFilter_KeyAndFlags: the events list's key and flag filters select, in a bulk
// action, exactly the keys of the events they list: a key in its source or in every
// source; the keys whose first delivery is flagged, by kind and review state.
func TestBulkFilter_KeyAndFlags(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	opt := storage.ClaimOptions{TTL: 24 * time.Hour, BusinessWindow: 24 * time.Hour}
	record(t, db, bk("ota", "evt_1", "B"), opt)
	if d := record(t, db, bk("ota", "evt_2", "B"), opt); !slices.Contains(d.Suspects, storage.SuspectBusinessKey) {
		t.Fatalf("evt_2 carries %v; want it flagged as a double of evt_1's business key", d.Suspects)
	}
	record(t, db, bk("ota", "evt_3", "C"), opt)
	record(t, db, bk("pms", "evt_1", "B"), opt)
	for _, tt := range []struct {
		name   string
		filter storage.BulkFilter
		want   []string
	}{
		{"KeyInEverySource", storage.BulkFilter{Key: "evt_1"}, []string{"ota/evt_1", "pms/evt_1"}},
		{"KeyInItsSource", storage.BulkFilter{Source: "ota", Key: "evt_1"}, []string{"ota/evt_1"}},
		{"KeyNowhere", storage.BulkFilter{Key: "evt_9"}, nil},
		{"FlagOfAKind", storage.BulkFilter{Flag: storage.SuspectBusinessKey}, []string{"ota/evt_2"}},
		{"FlagOfAnyKind", storage.BulkFilter{Flag: storage.FlagAny}, []string{"ota/evt_2"}},
		{"FlagState", storage.BulkFilter{FlagState: storage.SuspectOpen}, []string{"ota/evt_2"}},
		{"FlagStateNone", storage.BulkFilter{Flag: storage.SuspectBusinessKey, FlagState: storage.SuspectDismissed}, nil},
		{"FlagOtherKind", storage.BulkFilter{Flag: storage.SuspectCorrelation}, nil},
		{"KeyAndFlag", storage.BulkFilter{Key: "evt_1", Flag: storage.FlagAny}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, got := previewKeys(t, db, tt.filter)
			if !slices.Equal(got, tt.want) || a.Total != len(tt.want) {
				t.Errorf("keys %v (total %d); want %v", got, a.Total, tt.want)
			}
			if stored, err := db.BulkAction(ctx, a.ID); err != nil || stored.Filter != tt.filter {
				t.Errorf("stored filter %+v, %v; want %+v", stored.Filter, err, tt.filter)
			}
		})
	}
	t.Run("BadInput", func(t *testing.T) {
		for _, tt := range []struct {
			filter storage.BulkFilter
			want   string
		}{
			{storage.BulkFilter{Flag: "maybe"}, `flag "maybe"`},
			{storage.BulkFilter{FlagState: "closed"}, `flag_state "closed"`},
			{storage.BulkFilter{Key: " \t"}, "key"},
		} {
			_, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkRelease, Filter: tt.filter, Reason: "x", Actor: "ann"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%+v: %v; want an error naming %q", tt.filter, err, tt.want)
			}
		}
	})
}

// TestBulkRelease_ExpiredKey: a bulk release acts on a key past its ttl as releasing
// it alone does: its business key is forgotten (audited), so that a re-send of its
// event under a new id is neither flagged nor blocked; the preview counts it. A key
// released already is left out, and left as it was.
func TestBulkRelease_ExpiredKey(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour, BusinessBlocks: true}
	record(t, db, bk("ota", "evt_1", "B"), opt)
	record(t, db, bk("ota", "evt_r", "R"), opt)
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_r", Actor: "bob", Reason: "by hand"}); err != nil {
		t.Fatal(err)
	}
	before, err := db.Claim(ctx, "ota", "evt_r")
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Hour) // evt_1 past its ttl, not swept
	a, keys := previewKeys(t, db, storage.BulkFilter{Source: "ota"})
	if !slices.Equal(keys, []string{"ota/evt_1"}) || a.Expired != 1 || !reflect.DeepEqual(a.LeftOut, map[string]int{storage.LeftOutFree: 1}) {
		t.Fatalf("preview: keys %v, %d expired, left out %v; want evt_1, 1 expired, the released key already free", keys, a.Expired, a.LeftOut)
	}
	if stored, err := db.BulkAction(ctx, a.ID); err != nil || stored.Expired != 1 {
		t.Errorf("stored: %d expired, %v; want 1", stored.Expired, err)
	}
	id := approveAndRun(t, db, a, clk.Now().Add(-10*time.Minute))
	if a, _ = db.BulkAction(ctx, id); a.State != storage.BulkDone || a.Changed != 1 {
		t.Errorf("run: %+v; want done, the expired key changed", a)
	}
	entries, err := db.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	for _, x := range entries {
		if x.Action == "release" && x.Key == "evt_1" {
			released++
			if x.PreviousState != "expired" || x.Actor != "ann" || !strings.Contains(x.Reason, fmt.Sprintf("bulk action %d", id)) {
				t.Errorf("audit of evt_1 = %+v; want ann's release of an expired key, naming the action", x)
			}
		}
	}
	if released != 1 {
		t.Errorf("%d audited releases of evt_1; want 1 (audit %+v)", released, entries)
	}
	again := record(t, db, bk("ota", "evt_2", "B"), opt)
	if again.Outcome != storage.Accepted {
		t.Fatalf("re-send after the bulk release = %s of %d, want accepted", again.Outcome, again.FirstDelivery)
	}
	if _, sus := flagsOf(t, db, again.ID); len(sus) != 0 {
		t.Errorf("re-send after the bulk release carries suspects %+v", sus)
	}
	if after, err := db.Claim(ctx, "ota", "evt_r"); err != nil || after != before {
		t.Errorf("released key after the bulk release = %+v, %v; want it unchanged, %+v", after, err, before)
	}
}

// TestBulkReprocess_ExpiredKey: a bulk reprocess takes a key past its ttl as
// reprocessing it alone does: its stored payload is sent again and the key held again
// for its ttl, from the reprocess; nothing is counted expired, nothing forgotten.
func TestBulkReprocess_ExpiredKey(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	record(t, db, bk("ota", "evt_1", "B"), storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour})
	clk.Add(2 * time.Hour)
	a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkReprocess, Filter: storage.BulkFilter{Source: "ota"},
		Reason: "downstream lost it", Actor: "ann", StuckBefore: clk.Now().Add(-10 * time.Minute)})
	if err != nil || a.Total != 1 || a.Expired != 0 || len(a.LeftOut) != 0 {
		t.Fatalf("preview: %+v, %v; want the expired key, none counted expired", a, err)
	}
	approveAndRun(t, db, a, clk.Now().Add(-10*time.Minute))
	c, err := db.Claim(ctx, "ota", "evt_1")
	if err != nil || c.State != storage.StateProcessing || !c.ExpiresAt.Equal(clk.Now().Add(time.Hour)) {
		t.Errorf("after the bulk reprocess: %+v, %v; want processing, held for its ttl from now", c, err)
	}
	if again := record(t, db, bk("ota", "evt_2", "B"), storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour}); !slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send under a new id after the reprocess carries %v; want it flagged, the event having been sent again", again.Suspects)
	}
}

// TestBulkRelease_ExpiredSwept: a key past its ttl in a release's preview is usually
// swept before the run (the sweep runs every minute), leaving a trace: the run still
// releases it as releasing it alone does, forgetting its trace and business key
// (audited), so that a re-send of its event under a new id is accepted unflagged.
func TestBulkRelease_ExpiredSwept(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour, BusinessBlocks: true}
	record(t, db, bk("ota", "evt_1", "B"), opt)
	clk.Add(2 * time.Hour)
	a, keys := previewKeys(t, db, storage.BulkFilter{Source: "ota"})
	if !slices.Equal(keys, []string{"ota/evt_1"}) || a.Expired != 1 {
		t.Fatalf("preview: keys %v, %d expired; want evt_1, expired", keys, a.Expired)
	}
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want evt_1 swept", n, err)
	}
	id := approveAndRun(t, db, a, clk.Now().Add(-10*time.Minute))
	if a, _ = db.BulkAction(ctx, id); a.State != storage.BulkDone || a.Changed != 1 || a.Refused != 0 {
		t.Errorf("run: changed %d, refused %d, skipped %d (%s); want the swept key changed", a.Changed, a.Refused, a.Skipped, a.State)
	}
	if ks, err := db.BulkKeys(ctx, id, 10); err != nil || len(ks) != 1 || ks[0].Outcome != storage.BulkKeyChanged {
		t.Errorf("keys %+v, %v; want evt_1 changed", ks, err)
	}
	entries, err := db.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	for _, x := range entries {
		if x.Action == "release" && x.Key == "evt_1" {
			released++
			if x.PreviousState != "expired" || x.Actor != "ann" || !strings.Contains(x.Reason, fmt.Sprintf("bulk action %d", id)) {
				t.Errorf("audit of evt_1 = %+v; want ann's release of an expired key, naming the action", x)
			}
		}
	}
	if released != 1 {
		t.Errorf("%d audited releases of evt_1; want 1 (audit %+v)", released, entries)
	}
	again := record(t, db, bk("ota", "evt_2", "B"), opt)
	if again.Outcome != storage.Accepted {
		t.Fatalf("re-send after the bulk release = %s, want accepted", again.Outcome)
	}
	if _, sus := flagsOf(t, db, again.ID); len(sus) != 0 || len(again.Suspects) != 0 {
		t.Errorf("re-send after the bulk release carries suspects %+v %v", sus, again.Suspects)
	}
}

// TestBulkReprocess_ExpiredSwept: a key past its ttl in a reprocess's preview, swept
// before a second operator approves the reprocess, is refused as not found, as
// reprocessing it alone is: its claim, which a reprocess sends again, is gone. Nothing
// is forgotten, so a re-send under a new id is still flagged.
func TestBulkReprocess_ExpiredSwept(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour}
	record(t, db, bk("ota", "evt_1", "B"), opt)
	clk.Add(2 * time.Hour)
	limits := storage.ApprovalThresholds{"EUR": "10.00"}
	a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: storage.BulkReprocess, Filter: storage.BulkFilter{Source: "ota"},
		Reason: "downstream lost it", Actor: "ann", StuckBefore: clk.Now().Add(-10 * time.Minute), Thresholds: limits})
	if err != nil || a.Total != 1 {
		t.Fatalf("preview: %+v, %v; want the expired key", a, err)
	}
	if a, err = db.StartBulkAction(ctx, a.ID, "ann", limits); err != nil || a.State != storage.BulkPendingApproval {
		t.Fatalf("start: %s, %v; want it awaiting approval", a.State, err)
	}
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want evt_1 swept", n, err)
	}
	if _, err := db.ApproveBulkAction(ctx, a.ID, "bob", "checked"); err != nil {
		t.Fatal(err)
	}
	id, ok, err := db.ClaimBulkAction(ctx, "r1", time.Minute)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	runAll(t, db, id, "r1", clk.Now().Add(-10*time.Minute), 10)
	ks, err := db.BulkKeys(ctx, id, 10)
	if err != nil || len(ks) != 1 || ks[0].Outcome != string(storage.RefusedNotFound) {
		t.Errorf("keys %+v, %v; want evt_1 refused as not found", ks, err)
	}
	_, single := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "evt_1", Actor: "ann", Reason: "x", Reprocess: true})
	if r, _ := storage.RefusalOf(single); r != storage.RefusedNotFound {
		t.Errorf("a reprocess of the key alone: %v; the bulk run's outcome should be its refusal", single)
	}
	if again := record(t, db, bk("ota", "evt_2", "B"), opt); !slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send under a new id carries %v; want it flagged, nothing forgotten", again.Suspects)
	}
}

// TestBulkRelease_ClaimedAnewAndSwept: the key a preview listed expired, was swept,
// claimed anew by another delivery, and that claim expired and was swept too, all
// before the run. The run finds no claim either way; the trace it finds is the newer
// claim's, which no preview showed, so the key is skipped as changed, as it is while
// the newer claim is there, and the newer delivery's business key still flags a
// re-send of its event.
func TestBulkRelease_ClaimedAnewAndSwept(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour}
	record(t, db, bk("ota", "evt_1", "B"), opt)
	clk.Add(2 * time.Hour)
	a, keys := previewKeys(t, db, storage.BulkFilter{Source: "ota"})
	if !slices.Equal(keys, []string{"ota/evt_1"}) {
		t.Fatalf("preview: keys %v; want evt_1", keys)
	}
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want the expired claim swept", n, err)
	}
	clk.Add(time.Minute)
	anew := record(t, db, bk("ota", "evt_1", "B2"), opt)
	clk.Add(2 * time.Hour)
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("second sweep: %d, %v; want the newer claim swept", n, err)
	}
	id := approveAndRun(t, db, a, clk.Now().Add(-10*time.Minute))
	ks, err := db.BulkKeys(ctx, id, 10)
	if err != nil || len(ks) != 1 || ks[0].Outcome != storage.BulkKeySkipped {
		t.Fatalf("outcomes %+v, %v; want evt_1 skipped: the trace is of delivery %d's claim, made after the preview", ks, err, anew.ID)
	}
	if again := record(t, db, bk("ota", "evt_3", "B2"), opt); !slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send of delivery %d's event under a new id: flags %v, want its business key", anew.ID, again.Suspects)
	}
}

// TestBulkRelease_ClaimedAnewStampedBeforePreview: a delivery stamped (its ReceivedAt,
// which becomes its claim's claimed_at) a moment before the preview but committed after
// it, as one waiting for the writer is, takes over the expired claim the preview
// listed; its own claim expires and is swept before the run. The trace the run finds
// is of that newer claim, which no preview showed, though it was stamped first: the key
// is skipped, and the newer delivery's business key still flags a re-send of its event.
func TestBulkRelease_ClaimedAnewStampedBeforePreview(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour}
	record(t, db, bk("ota", "evt_1", "B"), opt)
	clk.Add(2 * time.Hour)
	stamped := clk.Now().Add(-time.Millisecond) // received, queued, not yet committed
	a, keys := previewKeys(t, db, storage.BulkFilter{Source: "ota"})
	if !slices.Equal(keys, []string{"ota/evt_1"}) {
		t.Fatalf("preview: keys %v; want evt_1", keys)
	}
	y := bk("ota", "evt_1", "B2")
	y.ReceivedAt = stamped
	anew := record(t, db, y, opt) // commits after the preview: takes over the expired claim
	clk.Add(2 * time.Hour)
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want the newer claim swept", n, err)
	}
	id := approveAndRun(t, db, a, clk.Now().Add(-10*time.Minute))
	ks, err := db.BulkKeys(ctx, id, 10)
	if err != nil || len(ks) != 1 || ks[0].Outcome != storage.BulkKeySkipped {
		t.Errorf("outcomes %+v, %v; want evt_1 skipped: the trace is of delivery %d's claim, made after the preview", ks, err, anew.ID)
	}
	if again := record(t, db, bk("ota", "evt_3", "B2"), opt); !slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send of delivery %d's event under a new id: flags %v, want its business key", anew.ID, again.Suspects)
	}
}

// TestBulkRelease_PreviewedClaimStampedAhead: the claim a preview listed was stamped by
// a replica whose time runs 50 ms ahead of the one that made the preview (within the
// PostgreSQL engine's clockSlack), and is expired and swept before the run. The trace
// the run finds is of the previewed claim itself, though stamped after the preview:
// the key is released, and its business key, which the preview said would be
// forgotten, no longer flags.
func TestBulkRelease_PreviewedClaimStampedAhead(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	clk := newClock(e, db)
	opt := storage.ClaimOptions{TTL: time.Hour, BusinessWindow: 24 * time.Hour}
	x := bk("ota", "evt_1", "B")
	x.ReceivedAt = clk.Now().Add(50 * time.Millisecond) // another replica's stamp
	record(t, db, x, opt)
	a, keys := previewKeys(t, db, storage.BulkFilter{Source: "ota"})
	if !slices.Equal(keys, []string{"ota/evt_1"}) {
		t.Fatalf("preview: keys %v; want evt_1", keys)
	}
	clk.Add(2 * time.Hour)
	if n, err := db.SweepExpired(ctx, clk.Now(), 100); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v; want the previewed claim swept", n, err)
	}
	id := approveAndRun(t, db, a, clk.Now().Add(-10*time.Minute))
	ks, err := db.BulkKeys(ctx, id, 10)
	if err != nil || len(ks) != 1 || ks[0].Outcome != storage.BulkKeyChanged {
		t.Errorf("outcomes %+v, %v; want evt_1 changed: the trace is of the previewed claim", ks, err)
	}
	if again := record(t, db, bk("ota", "evt_3", "B"), opt); slices.Contains(again.Suspects, storage.SuspectBusinessKey) {
		t.Errorf("a re-send of the released event under a new id: flags %v, want its business key forgotten", again.Suspects)
	}
}

// TestBulkReprocess_SourcesRun: a reprocess whose filter names no source covers the keys
// of the sources run (KeySources) alone: a key of a source no longer configured would
// wait in processing for a dispatcher nothing starts. A release covers every source's:
// freeing such a key is what an operator may want.
func TestBulkReprocess_SourcesRun(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	bulkActors(t, db)
	newClock(e, db)
	opt := storage.ClaimOptions{TTL: 24 * time.Hour}
	for _, d := range []*storage.Delivery{bk("ota", "evt_1", ""), bk("gone", "evt_2", "")} {
		record(t, db, d, opt)
	}
	for _, tt := range []struct {
		kind string
		want []string
	}{
		{storage.BulkReprocess, []string{"ota/evt_1"}},
		{storage.BulkRelease, []string{"ota/evt_1", "gone/evt_2"}},
	} {
		a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: tt.kind, Reason: "check", Actor: "ann",
			KeySources: []string{"ota", "pms"}, StuckBefore: time.Unix(0, 0)})
		if err != nil {
			t.Fatalf("%s: %v", tt.kind, err)
		}
		keys, err := db.BulkKeys(ctx, a.ID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range keys {
			got = append(got, k.Source+"/"+k.Key)
		}
		if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(tt.want))) || a.Total != len(tt.want) {
			t.Errorf("%s of no source: %d keys %v, want %v", tt.kind, a.Total, got, tt.want)
		}
		if _, err := db.CancelBulkAction(ctx, a.ID, "ann", "checked"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBulkStalePreviewDeleted: a preview never started is deleted, with its keys, once
// it is more than MaxPreviewAge old, by the runner of bulk actions that serve runs, and
// not only when someone makes another preview: a stale preview is of no use (it can be
// neither started nor approved), and without another preview it stayed listed for good.
// A stale action waiting for approval stays, to be refused.
func TestBulkStalePreviewDeleted(t *testing.T, e Engine) {
	ctx := context.Background()
	db, clk, req := fourEyesFixture(t, e)
	stale, err := db.CreateBulkPreview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := db.CreateBulkPreview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if pending, err = db.StartBulkAction(ctx, pending.ID, "ann", req.Thresholds); err != nil || pending.State != storage.BulkPendingApproval {
		t.Fatalf("start: %+v, %v", pending, err)
	}
	clk.Add(storage.MaxPreviewAge + time.Second)
	run, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.RunBulkActions(run, storage.BulkRunConfig{Poll: 10 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := db.BulkAction(ctx, stale.ID)
		keys, kerr := db.BulkKeys(ctx, stale.ID, 100)
		if kerr != nil {
			t.Fatal(kerr)
		}
		if errors.Is(err, storage.ErrNotFound) && len(keys) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a preview %v old is still there with the runner running: %v, %d keys", storage.MaxPreviewAge+time.Second, err, len(keys))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a, err := db.BulkAction(ctx, pending.ID); err != nil || a.State != storage.BulkPendingApproval {
		t.Errorf("the stale action awaiting approval: %+v, %v; want it kept, to be refused", a, err)
	}
}

// TestBulkSources: the sources of a bulk action's keys, each once, sorted, read
// without its keys: starting or approving a reprocess checks each against the
// configuration, and an action holds up to MaxBulkKeys keys. An action filtered to a
// source has that one; an action without keys, or no action, has none.
func TestBulkSources(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	newClock(e, db)
	opt := storage.ClaimOptions{TTL: 24 * time.Hour}
	for _, d := range []*storage.Delivery{bk("pms", "evt_1", ""), bk("ota", "evt_2", ""), bk("pms", "evt_3", ""),
		bk("ota", "evt_4", ""), bk("gone", "evt_5", "")} {
		record(t, db, d, opt)
	}
	for _, tt := range []struct {
		kind, source string
		want         []string
	}{
		{storage.BulkRelease, "", []string{"gone", "ota", "pms"}},
		{storage.BulkReprocess, "", []string{"ota", "pms"}},
		{storage.BulkReprocess, "pms", []string{"pms"}},
		{storage.BulkRelease, "nosuch", nil},
	} {
		a, err := db.CreateBulkPreview(ctx, storage.BulkRequest{Kind: tt.kind, Reason: "check", Actor: "ann",
			Filter: storage.BulkFilter{Source: tt.source}, KeySources: []string{"ota", "pms"}, StuckBefore: time.Unix(0, 0)})
		if err != nil {
			t.Fatalf("%s of %q: %v", tt.kind, tt.source, err)
		}
		got, err := db.BulkSources(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s of %q: sources %q, want %q", tt.kind, tt.source, got, tt.want)
		}
	}
	if got, err := db.BulkSources(ctx, 1<<40); err != nil || len(got) != 0 {
		t.Errorf("sources of no action: %q, %v; want none", got, err)
	}
}

// TestBulkTimesAsStored: an action as a preview, a start, a decision or a cancel returns
// it carries its times as they are stored, and as BulkAction reads them back: in UTC, to
// the millisecond. Returned with the clock's own reading, the answer to
// POST /api/v1/bulk gave its created_at in the server's time zone, to the nanosecond,
// and GET /api/v1/bulk/{id} another spelling of it.
func TestBulkTimesAsStored(t *testing.T, e Engine) {
	ctx := context.Background()
	db, clk, req := fourEyesFixture(t, e)
	clk.Set(time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.FixedZone("EST", -5*3600)))
	same := func(step string, got storage.BulkAction) {
		t.Helper()
		stored, err := db.BulkAction(ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name      string
			got, read time.Time
		}{
			{"created", got.CreatedAt, stored.CreatedAt}, {"started", got.StartedAt, stored.StartedAt},
			{"decided", got.DecidedAt, stored.DecidedAt}, {"finished", got.FinishedAt, stored.FinishedAt},
			{"updated", got.UpdatedAt, stored.UpdatedAt},
		} {
			if g, r := tt.got.Format(time.RFC3339Nano), tt.read.Format(time.RFC3339Nano); g != r {
				t.Errorf("%s: %s at %s; read back %s", step, tt.name, g, r)
			}
		}
	}
	a, err := db.CreateBulkPreview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	same("preview", a)
	clk.Add(time.Second + 654321)
	if a, err = db.StartBulkAction(ctx, a.ID, "ann", req.Thresholds); err != nil || a.State != storage.BulkPendingApproval {
		t.Fatalf("start: %+v, %v", a, err)
	}
	same("start", a)
	clk.Add(time.Second + 987654)
	if a, err = db.RefuseBulkAction(ctx, a.ID, "bob", "not now"); err != nil {
		t.Fatal(err)
	}
	same("refusal", a)
	release := req
	release.Kind = storage.BulkRelease
	if a, err = db.CreateBulkPreview(ctx, release); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second + 111)
	if a, err = db.StartBulkAction(ctx, a.ID, "ann", nil); err != nil {
		t.Fatal(err)
	}
	same("start of a release", a)
	if a, err = db.CancelBulkAction(ctx, a.ID, "bob", "wrong filter"); err != nil {
		t.Fatal(err)
	}
	same("cancel", a)
}

// TestBulkStalePreviewIDNotReused: the id of a preview deleted for its age is never
// another action's. A page of the old preview left open (its Start button, or a
// script's id) would otherwise start the new one, of another filter, keys and money,
// when the new preview takes the id the old one left: SQLite gives a new row the
// highest id plus one, and the preview that is deleted as the next is made is often the
// newest.
func TestBulkStalePreviewIDNotReused(t *testing.T, e Engine) {
	ctx := context.Background()
	db, clk, req := fourEyesFixture(t, e)
	old, err := db.CreateBulkPreview(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(storage.MaxPreviewAge + time.Second)
	other := req
	other.Kind, other.Filter = storage.BulkRelease, storage.BulkFilter{Source: "pms"}
	fresh, err := db.CreateBulkPreview(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID == old.ID {
		t.Fatalf("the new preview took the id %d of the one deleted for its age", old.ID)
	}
	if a, err := db.StartBulkAction(ctx, old.ID, "ann", req.Thresholds); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("start of the old preview's id %d: %+v, %v; want ErrNotFound", old.ID, a, err)
	}
	if a, err := db.BulkAction(ctx, fresh.ID); err != nil || a.State != storage.BulkPreview {
		t.Errorf("the new preview: %+v, %v; want it a preview still", a, err)
	}
}
