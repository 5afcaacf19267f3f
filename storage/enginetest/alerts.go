package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestAlerts(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	cond := storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota", Summary: "3 failed", Value: "3", Channels: []string{"ops", "chat"}}

	t.Run("OneActivePerRuleAndSubject", func(t *testing.T) {
		a, opened, err := db.OpenAlert(ctx, cond, now)
		if err != nil || !opened || a.State != storage.AlertOpen || len(a.Channels) != 2 {
			t.Fatalf("open: %+v %v %v", a, opened, err)
		}
		again, opened, err := db.OpenAlert(ctx, cond, now.Add(time.Minute))
		if err != nil || opened || again.ID != a.ID {
			t.Fatalf("second open: %+v %v %v; want the active one, not opened", again, opened, err)
		}
		other := cond
		other.Subject = "cm"
		if _, opened, err := db.OpenAlert(ctx, other, now); err != nil || !opened {
			t.Fatalf("another subject: %v %v", opened, err)
		}
		// One notification per channel for each opening, none for the second call.
		ns, err := db.LeaseNotifications(ctx, now, time.Minute, 100, nil)
		if err != nil || len(ns) != 4 {
			t.Fatalf("lease: %d %v, want 4", len(ns), err)
		}
		// Leased: not handed out again until the lease ends.
		if again, err := db.LeaseNotifications(ctx, now.Add(30*time.Second), time.Minute, 100, nil); err != nil || len(again) != 0 {
			t.Fatalf("leased twice: %d %v", len(again), err)
		}
		for i, n := range ns {
			res := storage.NotificationResult{Sent: true}
			if i == 0 {
				res = storage.NotificationResult{Error: "HTTP 500", NextAt: now.Add(2 * time.Minute)}
			}
			if err := db.FinishNotification(ctx, n, res, now); err != nil {
				t.Fatal(err)
			}
		}
		if due, err := db.LeaseNotifications(ctx, now.Add(90*time.Second), time.Minute, 100, nil); err != nil || len(due) != 0 {
			t.Fatalf("retried before NextAt: %d %v", len(due), err)
		}
		due, err := db.LeaseNotifications(ctx, now.Add(2*time.Minute), time.Minute, 100, nil)
		if err != nil || len(due) != 1 || due[0].ID != ns[0].ID || due[0].Attempts != 1 {
			t.Fatalf("retry: %+v %v", due, err)
		}
	})

	t.Run("ResolveThenOpenAnew", func(t *testing.T) {
		as, err := db.ActiveAlerts(ctx)
		if err != nil || len(as) != 2 {
			t.Fatalf("active: %v %v", as, err)
		}
		r, err := db.ResolveAlert(ctx, as[0].ID, "", now)
		if err != nil || r.State != storage.AlertResolved || r.ResolvedBy != "" {
			t.Fatalf("resolve: %+v %v", r, err)
		}
		if _, err := db.ResolveAlert(ctx, as[0].ID, "kim", now); !errors.Is(err, storage.ErrAlertState) {
			t.Fatalf("resolve twice: %v, want ErrAlertState", err)
		}
		if _, err := db.AcknowledgeAlert(ctx, as[0].ID, "kim", now); !errors.Is(err, storage.ErrAlertState) {
			t.Fatalf("acknowledge a resolved alert: %v, want ErrAlertState", err)
		}
		if _, err := db.AcknowledgeAlert(ctx, 9999, "kim", now); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("acknowledge an unknown alert: %v, want ErrNotFound", err)
		}
		a, opened, err := db.OpenAlert(ctx, cond, now.Add(time.Hour))
		if err != nil || !opened || a.ID == as[0].ID {
			t.Fatalf("open after resolve: %+v %v %v; want a new alert", a, opened, err)
		}
		// Resolved by itself: no audit row; the listings see each state.
		if log, err := db.AuditLog(ctx, 0, 10); err != nil || len(log) != 0 {
			t.Fatalf("audit: %+v %v", log, err)
		}
		resolved, err := db.Alerts(ctx, storage.AlertFilter{State: storage.AlertResolved})
		if err != nil || len(resolved) != 1 || resolved[0].SentNotifications != 1 || resolved[0].PendingNotifications != 3 {
			t.Fatalf("resolved: %+v %v", resolved, err)
		}
		if _, err := db.Alerts(ctx, storage.AlertFilter{State: "bogus"}); err == nil {
			t.Fatal("unknown state listed")
		}
	})

	t.Run("FailingStreaks", func(t *testing.T) {
		for _, key := range []string{"k1", "k2"} {
			if err := db.Record(ctx, &storage.Delivery{Source: "ota", Key: key, PayloadHash: key, Status: 200, Body: []byte("{}")},
				storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
				t.Fatal(err)
			}
		}
		jobs, err := db.LeaseDue(ctx, time.Now().Add(time.Hour), time.Minute, 10, nil)
		if err != nil || len(jobs) != 2 {
			t.Fatalf("lease: %v %v", jobs, err)
		}
		j := jobs[0]
		for i, e := range []string{"HTTP 502", "", "HTTP 502", "HTTP 502"} { // oldest first
			// Each recorded as the attempt after the last, as the job leased again has it,
			// started after it.
			a := storage.Attempt{StartedAt: now.Add(time.Duration(i) * time.Second), Error: e}
			if _, err := db.FinishAttempt(ctx, j, a, storage.AttemptResult{NextAt: now}); err != nil {
				t.Fatal(err)
			}
			j.Attempts++
		}
		got, err := db.FailingStreaks(ctx, []string{"ota", "cm"}, 10)
		if err != nil || got["ota"] != 2 || got["cm"] != 0 {
			t.Fatalf("streaks = %v %v, want ota 2 (since its last success), cm 0", got, err)
		}
		if got, _ := db.FailingStreaks(ctx, []string{"ota"}, 1); got["ota"] != 1 {
			t.Fatalf("streak bounded by limit 1: %v", got)
		}
	})
}

// TestSweepAlerts deletes the alerts resolved before the cutoff with their
// notifications, in batches of the limit, and keeps active alerts however old, alerts
// resolved since the cutoff, and an alert whose notification is still being retried.
func TestSweepAlerts(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	open := func(subject string, at time.Time) storage.Alert {
		t.Helper()
		a, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: subject, Channels: []string{"ops"}}, at)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// send finishes with res every notification due at at, each alert's in turn.
	send := func(at time.Time, res storage.NotificationResult) {
		t.Helper()
		for range 10 {
			ns, err := db.LeaseNotifications(ctx, at, time.Minute, 100, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ns) == 0 {
				return
			}
			for _, n := range ns {
				if err := db.FinishNotification(ctx, n, res, at); err != nil {
					t.Fatal(err)
				}
			}
			at = at.Add(time.Millisecond)
		}
	}
	var old []int64
	for i := range 5 { // resolved long ago, notifications sent or given up
		a := open("ota", now)
		if _, err := db.ResolveAlert(ctx, a.ID, "", now.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		send(now.Add(time.Hour), storage.NotificationResult{Sent: i%2 == 0, Failed: i%2 == 1, Error: "x"})
		old = append(old, a.ID)
	}
	retrying := open("cm", now)
	if _, err := db.ResolveAlert(ctx, retrying.ID, "", now); err != nil {
		t.Fatal(err)
	}
	send(now.Add(time.Hour), storage.NotificationResult{Error: "HTTP 500", NextAt: now.Add(100 * time.Hour)})
	active := open("ota", now) // open since long ago
	recent := open("pms", now)
	if _, err := db.ResolveAlert(ctx, recent.ID, "", now.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}

	cutoff := now.Add(24 * time.Hour)
	for _, want := range []int64{2, 2, 1, 0} {
		n, err := db.SweepAlerts(ctx, cutoff, 2)
		if err != nil || n != want {
			t.Fatalf("sweep: %d %v, want %d", n, err, want)
		}
	}
	as, err := db.Alerts(ctx, storage.AlertFilter{State: "all"})
	if err != nil {
		t.Fatal(err)
	}
	var left []int64
	for _, a := range as {
		left = append(left, a.ID)
	}
	if want := []int64{recent.ID, active.ID, retrying.ID}; fmt.Sprint(left) != fmt.Sprint(want) {
		t.Fatalf("alerts left %v, want %v (old ones were %v)", left, want, old)
	}
	counts, err := db.NotificationCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Left, all waiting: the retrying one's two, the active one's opening, the recent
	// one's two. The old ones' sent and given-up notifications went with them.
	if c := counts["ops"]; c["pending"] != 5 || c["sent"] != 0 || c["failed"] != 0 {
		t.Errorf("notifications left %v, want those of the alerts kept only", counts)
	}
}

// TestAlerts_TwoHandles: two handles on one database (two replicas, or two processes)
// whose alert engines see the same condition at once open one alert, written with one
// notification per channel; senders on both lease each notification once, and again
// only once its lease has ended.
func TestAlerts_TwoHandles(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	const subjects, perHandle = 10, 4

	t.Run("OpenOnce", func(t *testing.T) {
		for i := range subjects {
			cond := storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: fmt.Sprintf("src%d", i),
				Summary: "3 failed", Value: "3", Channels: []string{"ops", "chat"}}
			type result struct {
				id     int64
				opened bool
				err    error
			}
			results := make(chan result, 2*perHandle)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, db := range []storage.Store{a, b} {
				for range perHandle {
					wg.Go(func() {
						<-start
						al, opened, err := db.OpenAlert(ctx, cond, now)
						results <- result{al.ID, opened, err}
					})
				}
			}
			close(start)
			wg.Wait()
			close(results)
			opened, ids := 0, map[int64]bool{}
			for r := range results {
				if r.err != nil {
					t.Fatalf("open %s: %v", cond.Subject, r.err)
				}
				if r.opened {
					opened++
				}
				ids[r.id] = true
			}
			if opened != 1 || len(ids) != 1 {
				t.Fatalf("%s: %d openings reported opened, alerts %v; want one opening of one alert", cond.Subject, opened, ids)
			}
		}
		active, err := b.ActiveAlerts(ctx)
		if err != nil || len(active) != subjects {
			t.Fatalf("active alerts: %d %v, want %d", len(active), err, subjects)
		}
		counts, err := a.NotificationCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if counts["ops"]["pending"] != subjects || counts["chat"]["pending"] != subjects {
			t.Fatalf("notifications %v, want %d per channel: one per alert", counts, subjects)
		}
	})

	// leaseAll leases from both handles at once, perHandle senders each, limit 3 a
	// call, until nothing is left due at at, and returns how often each notification
	// was leased.
	leaseAll := func(t *testing.T, at time.Time) map[int64]int {
		t.Helper()
		leased := make(chan int64, 4*subjects)
		errs := make(chan error, 2*perHandle)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, db := range []storage.Store{a, b} {
			for range perHandle {
				wg.Go(func() {
					<-start
					for range 4 * subjects {
						ns, err := db.LeaseNotifications(ctx, at, time.Hour, 3, nil)
						if err != nil {
							errs <- err
							return
						}
						if len(ns) == 0 {
							return
						}
						for _, n := range ns {
							select {
							case leased <- n.ID:
							default:
								errs <- fmt.Errorf("more leases than notifications, at notification %d", n.ID)
								return
							}
						}
					}
				})
			}
		}
		close(start)
		wg.Wait()
		close(leased)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		// A sender that found every due notification locked by the others may have
		// stopped early: nothing must be left due.
		if left, err := a.LeaseNotifications(ctx, at, time.Hour, 100, nil); err != nil || len(left) != 0 {
			t.Fatalf("left due after the senders stopped: %d %v", len(left), err)
		}
		times := map[int64]int{}
		for id := range leased {
			times[id]++
		}
		return times
	}
	check := func(t *testing.T, times map[int64]int) {
		t.Helper()
		if len(times) != 2*subjects {
			t.Fatalf("%d notifications leased, want %d", len(times), 2*subjects)
		}
		for id, n := range times {
			if n != 1 {
				t.Errorf("notification %d leased %d times", id, n)
			}
		}
	}

	t.Run("LeaseOnce", func(t *testing.T) {
		check(t, leaseAll(t, now))
	})
	t.Run("LeaseEnds", func(t *testing.T) {
		// Nobody finished them: an hour on, their leases have ended and each is taken
		// again, once.
		check(t, leaseAll(t, now.Add(time.Hour)))
	})
}

// TestAlerts_OpenedTold: an alert whose opening some of its channels were already told
// of straight away is stored with an opened notification queued for the others only
// (a send cut by a stop, or given up); its resolution is queued for every channel.
func TestAlerts_OpenedTold(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a, opened, err := db.OpenAlert(ctx, storage.Alert{Rule: "db", Kind: "database_not_ready", Summary: "cannot commit",
		Channels: []string{"ops", "mail"}, OpenedTold: []string{"ops"}}, now)
	if err != nil || !opened {
		t.Fatalf("open: %v %v", opened, err)
	}
	ns, err := db.LeaseNotifications(ctx, now, time.Minute, 10, nil)
	if err != nil || len(ns) != 1 || ns[0].Channel != "mail" || ns[0].Event != storage.AlertOpened {
		t.Fatalf("notifications of an alert told already on ops: %+v, %v; want mail's opening alone", ns, err)
	}
	if err := db.FinishNotification(ctx, ns[0], storage.NotificationResult{Sent: true}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ResolveAlert(ctx, a.ID, "", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	ns, err = db.LeaseNotifications(ctx, now.Add(time.Minute), time.Minute, 10, nil)
	var got []string
	for _, n := range ns {
		got = append(got, n.Channel+" "+n.Event)
	}
	slices.Sort(got)
	if want := []string{"mail " + storage.AlertResolved, "ops " + storage.AlertResolved}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("notifications once resolved: %q, %v; want %q", got, err, want)
	}
}

// TestAlerts_OddText: an error a channel's server sent back may hold any bytes, a NUL
// or invalid UTF-8 among them; recording it must not fail, or the notification would
// be sent again and again.
func TestAlerts_OddText(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if _, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota",
		Channels: []string{"ops", "mail"}}, now); err != nil {
		t.Fatal(err)
	}
	ns, err := db.LeaseNotifications(ctx, now, time.Minute, 10, nil)
	if err != nil || len(ns) != 2 {
		t.Fatalf("lease: %d %v", len(ns), err)
	}
	if err := db.FinishNotification(ctx, ns[0], storage.NotificationResult{Error: "HTTP 500: a\x00b\xff", NextAt: now.Add(time.Minute)}, now); err != nil {
		t.Fatalf("an error with a NUL byte and invalid UTF-8: %v", err)
	}
	if err := db.FinishNotification(ctx, ns[1], storage.NotificationResult{Failed: true, Error: "550 \x00"}, now); err != nil {
		t.Fatalf("a last error with a NUL byte: %v", err)
	}
	as, err := db.Alerts(ctx, storage.AlertFilter{})
	if err != nil || len(as) != 1 {
		t.Fatalf("alerts: %v %v", as, err)
	}
	if got := as[0].LastNotificationError; !strings.HasPrefix(got, "550 ") {
		t.Fatalf("last notification error %q, want the last one recorded", got)
	}
}

// TestAlerts_HeldByEitherHandle: replicas evaluate the rules at their own moments, so a
// flapping condition may hold at one's evaluations and be clear at the other's. The
// alert resolves by itself (ClearAlert) only once no handle held it for the clear period,
// and a hold never moves back in time.
func TestAlerts_HeldByEitherHandle(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	const clearFor = 2 * time.Minute
	al, opened, err := a.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota",
		Summary: "1 failed", Value: "1", Channels: []string{"ops"}}, t0)
	if err != nil || !opened || !al.HeldAt.Equal(t0) {
		t.Fatalf("open: %+v %v %v; want held at its opening", al, opened, err)
	}
	if err := b.HoldAlert(ctx, al.ID, "2 failed", "2", t0.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := a.HoldAlert(ctx, al.ID, "2 failed", "2", t0.Add(30*time.Second)); err != nil { // an evaluation that ran late
		t.Fatal(err)
	}
	active, err := a.ActiveAlerts(ctx)
	if err != nil || len(active) != 1 {
		t.Fatalf("active: %+v %v", active, err)
	}
	if got := active[0]; !got.HeldAt.Equal(t0.Add(90*time.Second)) || got.Value != "2" || got.Summary != "2 failed" {
		t.Errorf("after the holds: held at %v, %q %q; want the latest hold, %v, and the last value", got.HeldAt, got.Summary, got.Value,
			t0.Add(90*time.Second))
	}
	if _, err := a.ClearAlert(ctx, al.ID, clearFor, t0.Add(clearFor)); !errors.Is(err, storage.ErrAlertHeld) {
		t.Fatalf("clear %v after opening, held by the other handle %v before: %v, want ErrAlertHeld", clearFor, clearFor-90*time.Second, err)
	}
	if got, err := b.GetAlert(ctx, al.ID); err != nil || got.State != storage.AlertOpen {
		t.Fatalf("after a refused clear: %+v %v, want it open", got, err)
	}
	r, err := a.ClearAlert(ctx, al.ID, clearFor, t0.Add(90*time.Second+clearFor))
	if err != nil || r.State != storage.AlertResolved || r.ResolvedBy != "" {
		t.Fatalf("clear once clear for %v since the last hold: %+v %v", clearFor, r, err)
	}
	if _, err := b.ClearAlert(ctx, al.ID, clearFor, t0.Add(time.Hour)); !errors.Is(err, storage.ErrAlertState) {
		t.Errorf("clear twice: %v, want ErrAlertState", err)
	}
	if err := b.HoldAlert(ctx, al.ID, "3 failed", "3", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := a.GetAlert(ctx, al.ID); err != nil || got.Value != "2" || !got.HeldAt.Equal(t0.Add(90*time.Second)) {
		t.Errorf("a hold after it resolved changed it: %+v %v", got, err)
	}
	ns, err := a.LeaseNotifications(ctx, t0.Add(time.Hour), time.Minute, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The resolved waits for the opened to be told first.
	var events []string
	for _, n := range ns {
		events = append(events, n.Event)
		if err := a.FinishNotification(ctx, n, storage.NotificationResult{Sent: true}, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	ns, err = a.LeaseNotifications(ctx, t0.Add(time.Hour+time.Second), time.Minute, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		events = append(events, n.Event)
	}
	if want := []string{storage.AlertOpened, storage.AlertResolvedEvent}; fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("notifications %v, want %v", events, want)
	}
}

// TestAlerts_LateSenderRecordsNothing: a sender that stalls past its notification's
// lease (a paused machine) while another leases it again must record nothing when it
// wakes: neither a retry, which would let a third sender lease it while the second is
// still sending, nor a failure over the second's success.
func TestAlerts_LateSenderRecordsNothing(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	const lease = 5 * time.Minute
	if _, opened, err := a.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota",
		Channels: []string{"ops"}}, t0); err != nil || !opened {
		t.Fatalf("open alert: %v %v", opened, err)
	}
	gotA, err := a.LeaseNotifications(ctx, t0, lease, 10, nil)
	if err != nil || len(gotA) != 1 {
		t.Fatalf("first lease: %d %v", len(gotA), err)
	}
	tB := t0.Add(lease + time.Second)
	gotB, err := b.LeaseNotifications(ctx, tB, lease, 10, nil)
	if err != nil || len(gotB) != 1 || gotB[0].ID != gotA[0].ID {
		t.Fatalf("second lease, after the first ran out: %+v %v", gotB, err)
	}
	if err := a.FinishNotification(ctx, gotA[0], storage.NotificationResult{Error: "timeout", NextAt: tB.Add(time.Second)}, tB); !errors.Is(err, storage.ErrLeaseLost) {
		t.Errorf("the first sender's late retry: %v, want ErrLeaseLost", err)
	}
	if again, err := b.LeaseNotifications(ctx, tB.Add(2*time.Second), lease, 10, nil); err != nil || len(again) != 0 {
		t.Errorf("leased again while the second sender's lease runs: %d %v, want none", len(again), err)
	}
	if err := b.FinishNotification(ctx, gotB[0], storage.NotificationResult{Sent: true}, tB.Add(3*time.Second)); err != nil {
		t.Fatalf("the second sender's outcome: %v", err)
	}
	if err := a.FinishNotification(ctx, gotA[0], storage.NotificationResult{Failed: true, Error: "timeout"}, tB.Add(4*time.Second)); !errors.Is(err, storage.ErrLeaseLost) {
		t.Errorf("the first sender's late failure: %v, want ErrLeaseLost", err)
	}
	if err := b.FinishNotification(ctx, gotB[0], storage.NotificationResult{Sent: true}, tB.Add(5*time.Second)); !errors.Is(err, storage.ErrLeaseLost) {
		t.Errorf("an outcome recorded twice: %v, want ErrLeaseLost", err)
	}
	counts, err := a.NotificationCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"sent": 1}; fmt.Sprint(counts["ops"]) != fmt.Sprint(want) {
		t.Errorf("notification counts %v, want ops %v", counts, want)
	}
}

// TestAlerts_ToldInTheOrderOfTransitions: an alert's "opened" is refused once and
// waits for its retry; the alert is resolved meanwhile. Its "resolved" is not leased
// while the "opened" to the same channel is pending, on either handle, so the channel
// hears of the two in their order; another channel is not held back.
func TestAlerts_ToldInTheOrderOfTransitions(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	al, opened, err := a.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota",
		Channels: []string{"ops"}}, t0)
	if err != nil || !opened {
		t.Fatalf("open alert: %v %v", opened, err)
	}
	got, err := a.LeaseNotifications(ctx, t0, time.Minute, 10, nil)
	if err != nil || len(got) != 1 || got[0].Event != storage.AlertOpened {
		t.Fatalf("lease: %+v %v", got, err)
	}
	// Refused; retried in 10 s. The alert resolves meanwhile.
	if err := a.FinishNotification(ctx, got[0], storage.NotificationResult{Error: "HTTP 500", NextAt: t0.Add(10 * time.Second)}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ResolveAlert(ctx, al.ID, "rita", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, db := range []storage.Store{a, b} {
		if early, err := db.LeaseNotifications(ctx, t0.Add(2*time.Second), time.Minute, 10, nil); err != nil || len(early) != 0 {
			t.Fatalf("lease while the opened waits for its retry: %+v %v; want nothing (the resolved waits behind it)", early, err)
		}
	}
	opened1, err := b.LeaseNotifications(ctx, t0.Add(10*time.Second), time.Minute, 10, nil)
	if err != nil || len(opened1) != 1 || opened1[0].Event != storage.AlertOpened {
		t.Fatalf("lease at the retry: %+v %v; want the opened alone", opened1, err)
	}
	if err := b.FinishNotification(ctx, opened1[0], storage.NotificationResult{Sent: true}, t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	resolved, err := a.LeaseNotifications(ctx, t0.Add(12*time.Second), time.Minute, 10, nil)
	if err != nil || len(resolved) != 1 || resolved[0].Event != storage.AlertResolvedEvent {
		t.Fatalf("lease once the opened was sent: %+v %v; want the resolved", resolved, err)
	}
}

// TestAlerts_ReturnedCountsNoAttempt: a notification handed back by a sender that
// stopped mid-send is due again at once, on either handle, with no attempt counted.
func TestAlerts_ReturnedCountsNoAttempt(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if _, opened, err := a.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota",
		Channels: []string{"ops"}}, t0); err != nil || !opened {
		t.Fatalf("open alert: %v %v", opened, err)
	}
	got, err := a.LeaseNotifications(ctx, t0, 5*time.Minute, 10, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("lease: %+v %v", got, err)
	}
	if err := a.FinishNotification(ctx, got[0], storage.NotificationResult{Returned: true, NextAt: t0.Add(time.Second)}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	again, err := b.LeaseNotifications(ctx, t0.Add(time.Second), 5*time.Minute, 10, nil)
	if err != nil || len(again) != 1 || again[0].ID != got[0].ID || again[0].Attempts != 0 {
		t.Fatalf("lease after it was handed back: %+v %v; want it again, with no attempt counted", again, err)
	}
}

// TestAlerts_LeaseOnlyNamedChannels: a sender leases only the notifications of the
// channels it names, and the notifications due to a channel that no sender names are
// given up, once due for long enough, as no longer configured; one leased is not.
func TestAlerts_LeaseOnlyNamedChannels(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if _, opened, err := db.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota",
		Channels: []string{"ops", "pager"}}, t0); err != nil || !opened {
		t.Fatalf("open alert: %v %v", opened, err)
	}
	got, err := db.LeaseNotifications(ctx, t0, time.Minute, 10, []string{"ops"})
	if err != nil || len(got) != 1 || got[0].Channel != "ops" {
		t.Fatalf("lease for ops: %+v %v; want ops's alone", got, err)
	}
	// Not yet due long enough: kept for a sender that has pager.
	if n, err := db.GiveUpNotifications(ctx, []string{"ops"}, t0); err != nil || n != 0 {
		t.Fatalf("give up at once: %d %v, want none", n, err)
	}
	// Later: pager's, due since t0 and leased by no one, is given up; ops's, leased, is not.
	if n, err := db.GiveUpNotifications(ctx, []string{"ops"}, t0.Add(30*time.Second)); err != nil || n != 1 {
		t.Fatalf("give up later: %d %v, want pager's", n, err)
	}
	if left, err := db.LeaseNotifications(ctx, t0.Add(2*time.Minute), time.Minute, 10, nil); err != nil || len(left) != 1 || left[0].Channel != "ops" {
		t.Fatalf("left pending: %+v %v; want ops's alone", left, err)
	}
	counts, err := db.NotificationCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts["pager"]["failed"] != 1 {
		t.Errorf("pager's notifications %v, want one failed", counts["pager"])
	}
}

// TestAlerts_LeaseNoChannel: a sender whose configuration has rules but no channel names
// none (an empty list, not nil, which is any): it leases nothing, and gives up, once due
// for long enough, the notifications of every channel.
func TestAlerts_LeaseNoChannel(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if _, opened, err := db.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota",
		Channels: []string{"ops", "pager"}}, t0); err != nil || !opened {
		t.Fatalf("open alert: %v %v", opened, err)
	}
	if got, err := db.LeaseNotifications(ctx, t0, time.Minute, 10, []string{}); err != nil || len(got) != 0 {
		t.Fatalf("lease for no channel: %+v %v; want none", got, err)
	}
	if n, err := db.GiveUpNotifications(ctx, []string{}, t0); err != nil || n != 0 {
		t.Fatalf("give up at once: %d %v, want none", n, err)
	}
	if n, err := db.GiveUpNotifications(ctx, []string{}, t0.Add(30*time.Second)); err != nil || n != 2 {
		t.Fatalf("give up later: %d %v, want both", n, err)
	}
}

// TestAlerts_NextAlertToldAfterThePrevious: an alert is resolved by hand while its
// condition holds, and a new alert of the same rule and subject opens at once; the
// first's "resolved" is refused once and waits for its retry. The new alert's "opened"
// waits behind it, on either handle, so that a channel hears "resolved" and then
// "opened", and is not left reading the outage as over while the new alert is open.
// An alert of another subject is not held back.
func TestAlerts_NextAlertToldAfterThePrevious(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	cond := storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota", Channels: []string{"ops"}}
	first, opened, err := a.OpenAlert(ctx, cond, t0)
	if err != nil || !opened {
		t.Fatalf("open alert: %v %v", opened, err)
	}
	got, err := a.LeaseNotifications(ctx, t0, time.Minute, 10, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("lease the opening: %+v %v", got, err)
	}
	if err := a.FinishNotification(ctx, got[0], storage.NotificationResult{Sent: true}, t0); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Second)
	if _, err := a.ResolveAlert(ctx, first.ID, "rita", t1); err != nil {
		t.Fatal(err)
	}
	second, opened, err := a.OpenAlert(ctx, cond, t1)
	if err != nil || !opened || second.ID == first.ID {
		t.Fatalf("open the next alert: %+v %v %v", second, opened, err)
	}
	other, opened, err := a.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "cm",
		Channels: []string{"ops"}}, t1)
	if err != nil || !opened {
		t.Fatalf("open another subject's alert: %v %v", opened, err)
	}
	got, err = a.LeaseNotifications(ctx, t1, time.Minute, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	var leased []string
	for _, n := range got {
		leased = append(leased, fmt.Sprintf("%d %s", n.Alert.ID, n.Event))
	}
	want := []string{fmt.Sprintf("%d resolved", first.ID), fmt.Sprintf("%d opened", other.ID)}
	if !slices.Equal(leased, want) {
		t.Fatalf("leased %q; want %q (the next alert's opened waits for the previous one's resolved)", leased, want)
	}
	for _, n := range got {
		res := storage.NotificationResult{Sent: true}
		if n.Alert.ID == first.ID {
			res = storage.NotificationResult{Error: "HTTP 500", NextAt: t0.Add(10 * time.Second)}
		}
		if err := a.FinishNotification(ctx, n, res, t1); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []storage.Store{a, b} {
		if early, err := db.LeaseNotifications(ctx, t0.Add(2*time.Second), time.Minute, 10, nil); err != nil || len(early) != 0 {
			t.Fatalf("lease while the resolved waits for its retry: %+v %v; want nothing", early, err)
		}
	}
	resolved, err := b.LeaseNotifications(ctx, t0.Add(10*time.Second), time.Minute, 10, nil)
	if err != nil || len(resolved) != 1 || resolved[0].Alert.ID != first.ID || resolved[0].Event != storage.AlertResolvedEvent {
		t.Fatalf("lease at the retry: %+v %v; want the previous alert's resolved alone", resolved, err)
	}
	if err := b.FinishNotification(ctx, resolved[0], storage.NotificationResult{Sent: true}, t0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	next, err := a.LeaseNotifications(ctx, t0.Add(12*time.Second), time.Minute, 10, nil)
	if err != nil || len(next) != 1 || next[0].Alert.ID != second.ID || next[0].Event != storage.AlertOpened {
		t.Fatalf("lease once the resolved was sent: %+v %v; want the next alert's opened", next, err)
	}
}

// TestAlerts_HoldBeforeClockSetBack: an alert held at t0+1m, then the clock set back by
// an hour. Its hold, an hour ahead of the clock, keeps it from resolving by itself no
// longer than clear_for, on either handle; and a hold after the step is recorded at its
// own time, not left an hour ahead. A hold a few seconds ahead (another replica's
// moment) still counts.
func TestAlerts_HoldBeforeClockSetBack(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clearFor := 2 * time.Minute
	cond := storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "ota", Channels: []string{"ops"}}
	al, _, err := a.OpenAlert(ctx, cond, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.HoldAlert(ctx, al.ID, "3 failed", "3", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	back := t0.Add(time.Minute - time.Hour)
	if err := b.HoldAlert(ctx, al.ID, "3 failed", "3", back); err != nil {
		t.Fatal(err)
	}
	got, err := a.GetAlert(ctx, al.ID)
	if err != nil || !got.HeldAt.Equal(back) {
		t.Fatalf("held at %v (%v) after a hold at %v; want that hold's time", got.HeldAt, err, back)
	}
	if err := a.HoldAlert(ctx, al.ID, "3 failed", "3", back.Add(-5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClearAlert(ctx, al.ID, clearFor, back.Add(-5*time.Second)); !errors.Is(err, storage.ErrAlertHeld) {
		t.Fatalf("clear 5 s before the latest hold (another replica's): %v, want ErrAlertHeld", err)
	}

	other, _, err := a.OpenAlert(ctx, storage.Alert{Rule: "down", Kind: "downstream_failing", Subject: "cm", Channels: []string{"ops"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.HoldAlert(ctx, other.ID, "3 failed", "3", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClearAlert(ctx, other.ID, clearFor, t0.Add(time.Minute-time.Hour).Add(clearFor)); err != nil {
		t.Fatalf("clear, clear_for after the clock was set back an hour: %v; want it resolved", err)
	}
	got, err = a.GetAlert(ctx, other.ID)
	if err != nil || got.State != storage.AlertResolved {
		t.Fatalf("alert %+v (%v); want it resolved", got, err)
	}
}
