package enginetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// attemptErrors returns the errors of source/key's attempts, oldest first.
func attemptErrors(t *testing.T, db storage.Store, source, key string) []string {
	t.Helper()
	atts, err := db.Attempts(context.Background(), source, key)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range atts {
		got = append(got, a.Error)
	}
	return got
}

const answered503 = "downstream answered 503"

// finishRetry records a failed attempt of j and asks for a retry at next.
func finishRetry(t *testing.T, db storage.Store, j storage.Job, started, next time.Time) bool {
	t.Helper()
	moved, err := db.FinishAttempt(context.Background(), j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery,
		StartedAt: started, Status: 503, Error: answered503}, storage.AttemptResult{NextAt: next, LastError: answered503})
	if err != nil {
		t.Fatal(err)
	}
	return moved
}

// TestLeaseDue_TakeoverAtLeaseEnd: a released key keeps its last lease's end
// (leased_until); a new delivery that claims the key anew at exactly that millisecond
// must not leave next_attempt_at = leased_until, which LeaseDue would read as an
// interrupted hand-off, though the only attempt was recorded in time and the new claim
// was never handed to anyone.
func TestLeaseDue_TakeoverAtLeaseEnd(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "k", "h"), dispatchDay)
	j := leaseOne(t, db, clk.Now())
	clk.Add(time.Second)
	if !finishRetry(t, db, j, clk.Now(), clk.Now().Add(time.Hour)) {
		t.Fatal("attempt did not move the key")
	}
	clk.Add(time.Second)
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k", Actor: "sam", Reason: "r",
		StuckBefore: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("release: %v", err)
	}
	// The provider sends the event again exactly when the old lease would have ended.
	clk.Set(j.Lease)
	d := record(t, db, delivery("ota", "k", "h"), dispatchDay)
	if d.Outcome != storage.Accepted {
		t.Fatalf("new delivery %s; want it to claim the released key", d.Outcome)
	}
	// Due a millisecond later than it came: at the old lease's end, it would read as
	// that lease cut off.
	clk.Add(time.Millisecond)
	leaseOne(t, db, clk.Now())
	if got, want := attemptErrors(t, db, "ota", "k"), []string{answered503}; !slices.Equal(got, want) {
		t.Errorf("attempts %q, want %q: no hand-off of the new claim was interrupted", got, want)
	}
}

// TestLeaseDue_SourceTwice: LeaseDue of an interrupted key with its source named
// twice records the interrupted hand-off once, as it leases the key once.
func TestLeaseDue_SourceTwice(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "k", "h"), dispatchDay)
	leaseOne(t, db, clk.Now())
	clk.Add(2 * time.Minute)
	jobs, err := db.LeaseDue(ctx, clk.Now(), time.Minute, 10, []string{"ota", "ota"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("leased %v, %v; want k once", jobKeys(jobs), err)
	}
	if got, want := attemptErrors(t, db, "ota", "k"), []string{storage.AttemptInterrupted}; !slices.Equal(got, want) {
		t.Errorf("attempts %q, want one interrupted", got)
	}
}

// TestReleaseEach_RefusedReprocessRecordsNoInterruption: a bulk reprocess refused for its
// payload ("payload gone") writes nothing, though a bulk action commits the rest of its
// batch: the key is unchanged, and the next lease records its interrupted hand-off
// once, not twice.
func TestReleaseEach_RefusedReprocessRecordsNoInterruption(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	d := record(t, db, delivery("ota", "k", "h"), dispatchDay)
	leaseOne(t, db, clk.Now())
	// The process holding the lease is killed, and the payload is gone (a claim from
	// before every delivery was stored: the dispatcher's payloadProblem handles such keys).
	e.DeleteDelivery(t, db, d.ID)
	clk.Add(2 * time.Minute)
	out, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: "k"}}, storage.Release{Actor: "sam",
		Reason: "r", Reprocess: true, StuckBefore: clk.Now().Add(time.Hour)})
	if err != nil || len(out) != 1 || out[0].Refused != storage.RefusedPayloadGone {
		t.Fatalf("bulk reprocess: %+v, %v; want refused, payload gone", out, err)
	}
	if got := attemptErrors(t, db, "ota", "k"); len(got) != 0 {
		t.Errorf("a refused reprocess wrote attempts %q; want none", got)
	}
	lease(t, db, clk.Now(), time.Minute, 10)
	if got, want := attemptErrors(t, db, "ota", "k"), []string{storage.AttemptInterrupted}; !slices.Equal(got, want) {
		t.Errorf("after the next lease: attempts %q, want one interrupted hand-off", got)
	}
}

// TestLeaseDue_SourceTwiceLimit: a source named twice is one source on both engines:
// its keys count once each against the limit.
func TestLeaseDue_SourceTwiceLimit(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "k1", "h"), dispatchDay)
	clk.Add(time.Millisecond)
	record(t, db, delivery("ota", "k2", "h"), dispatchDay)
	clk.Add(time.Second)
	jobs, err := db.LeaseDue(ctx, clk.Now(), time.Minute, 2, []string{"ota", "ota"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jobKeys(jobs), []string{"k1", "k2"}; !slices.Equal(got, want) {
		t.Errorf("leased %v with a limit of 2, want %v", got, want)
	}
}

// twoReplicas opens one database twice, as two replicas sharing one clock, and records
// n keys to hand downstream, named spreadName(0) to spreadName(n-1).
func twoReplicas(t *testing.T, e Engine, n int) (a, b storage.Store, clk *Clock) {
	t.Helper()
	a = e.Open(t)
	clk = newClock(e, a)
	b = e.Reopen(t, a)
	e.SetClock(b, clk.Now)
	batch := make([]*storage.Delivery, 0, n)
	for i := range n {
		batch = append(batch, delivery("ota", spreadName(i), "h"))
	}
	if err := a.RecordBatch(context.Background(), batch, dispatchDay); err != nil {
		t.Fatal(err)
	}
	return a, b, clk
}

// replicaKeys is how many keys the replica tests hand off.
const replicaKeys = 200

// TestLeaseDue_InterruptedReplicas: every key's lease runs out unsettled; two replicas'
// dispatchers lease at once while an operator reprocesses and releases some of the
// keys: each key's interrupted hand-off is recorded exactly once.
func TestLeaseDue_InterruptedReplicas(t *testing.T, e Engine) {
	ctx := context.Background()
	a, b, clk := twoReplicas(t, e, replicaKeys)
	if jobs := lease(t, a, clk.Now(), time.Minute, replicaKeys); len(jobs) != replicaKeys {
		t.Fatalf("leased %d", len(jobs))
	}
	clk.Add(2 * time.Minute)
	now := clk.Now()
	done := make(chan struct{})
	errs := make(chan error, 16)
	for w := range 4 {
		db := a
		if w%2 == 1 {
			db = b
		}
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				var sources []string
				if w >= 2 {
					sources = []string{"ota"}
				}
				jobs, err := db.LeaseDue(ctx, now, time.Minute, 3, sources)
				if err != nil {
					errs <- err
					return
				}
				if len(jobs) == 0 {
					return
				}
			}
		}()
	}
	go func() {
		defer func() { done <- struct{}{} }()
		for i := 0; i < replicaKeys; i += 7 {
			_, _ = b.ReleaseKey(ctx, storage.Release{Source: "ota", Key: spreadName(i), Actor: "sam", Reason: "r",
				Reprocess: i%2 == 0, StuckBefore: now.Add(time.Hour)})
		}
	}()
	for range 5 {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range replicaKeys {
		got := attemptErrors(t, a, "ota", spreadName(i))
		if !slices.Equal(got, []string{storage.AttemptInterrupted}) {
			t.Errorf("%s: %d attempt rows %q, want one interrupted", spreadName(i), len(got), got)
		}
	}
}

// spreadName is the name of key i of a few hundred.
func spreadName(i int) string {
	return "k" + string(rune('a'+i/26%26)) + string(rune('a'+i%26)) + string(rune('a'+i/676))
}

// TestFinishAttempt_LateOutcomeRace: stalled attempts record their outcome while another
// replica leases their keys again: each hand-off is in the history once, as its outcome
// or (had it never come) as interrupted, never both.
func TestFinishAttempt_LateOutcomeRace(t *testing.T, e Engine) {
	lateOutcomesBeside(t, e, 0, func(b storage.Store, now time.Time) {
		for {
			js, err := b.LeaseDue(context.Background(), now, time.Minute, 2, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if len(js) == 0 {
				return
			}
		}
	})
}

// lateOutcomesBeside leases replicaKeys keys on one replica, lets the leases run out,
// and records each key's late outcome (a 503 that started ago before then) while beside
// runs on another replica: each key's history then holds that outcome alone.
func lateOutcomesBeside(t *testing.T, e Engine, ago time.Duration, beside func(b storage.Store, now time.Time)) {
	ctx := context.Background()
	a, b, clk := twoReplicas(t, e, replicaKeys)
	jobs := lease(t, a, clk.Now(), time.Minute, replicaKeys)
	if len(jobs) != replicaKeys {
		t.Fatalf("leased %d", len(jobs))
	}
	clk.Add(2 * time.Minute)
	now := clk.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, j := range jobs {
			if _, err := a.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery,
				StartedAt: now.Add(-ago), Status: 503, Error: answered503}, storage.AttemptResult{NextAt: now.Add(time.Hour), LastError: answered503}); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() { beside(b, now) })
	wg.Wait()
	for i := range replicaKeys {
		got := attemptErrors(t, a, "ota", spreadName(i))
		if len(got) != 1 || got[0] != answered503 {
			t.Errorf("%s: attempts %q, want the late outcome only", spreadName(i), got)
		}
	}
}

// TestFinishAttempt_LateOutcomeInPlace: a stalled process's late outcome takes its
// interrupted row's place in the key's history, before the hand-offs that came after
// it: after the next dispatcher succeeded, the key's last attempt (the Keys page's) is
// that success, not the stalled attempt's 503, and the source's failing streak does
// not count the 503.
func TestFinishAttempt_LateOutcomeInPlace(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "k", "h"), dispatchDay)
	stalled := leaseOne(t, db, clk.Now())
	startedStalled := clk.Now()
	clk.Add(2 * time.Minute)
	next := leaseOne(t, db, clk.Now())
	if moved, err := db.FinishAttempt(ctx, next, storage.Attempt{Source: "ota", Key: "k", Delivery: next.Delivery,
		StartedAt: clk.Now(), Status: 200}, storage.AttemptResult{Done: true}); err != nil || !moved {
		t.Fatalf("success: %v, %v", moved, err)
	}
	clk.Add(time.Second)
	if finishRetry(t, db, stalled, startedStalled, clk.Now().Add(time.Hour)) {
		t.Fatal("the stalled attempt moved the key")
	}
	if got, want := attemptErrors(t, db, "ota", "k"), []string{answered503, ""}; !slices.Equal(got, want) {
		t.Errorf("history %q, want %q: the late outcome in the interrupted one's place", got, want)
	}
	if last, err := db.LastAttempt(ctx, "ota", "k"); err != nil || last.Error != "" {
		t.Errorf("last attempt of the processed key: %q, %v; want the success", last.Error, err)
	}
	if got, err := db.FailingStreaks(ctx, []string{"ota"}, 10); err != nil || got["ota"] != 0 {
		t.Errorf("failing streak %v, %v; want 0: the downstream's latest answer was a success", got, err)
	}
}

// TestFinishAttempt_LateOutcomeThenNewerLease: a dispatcher whose job was leased again
// while its attempt was under way (its lease ran out by a clock stepped forward)
// records the outcome against its own lease, where it takes the interrupted row's
// place, then against the newer lease as listed already, which moves the key on: the
// key's history lists the one hand-off once, counted once. So it does when the answer
// to the first record was lost although it committed (PostgreSQL restarted as it
// answered), and the dispatcher records the outcome against the newer lease as not
// listed yet.
func TestFinishAttempt_LateOutcomeThenNewerLease(t *testing.T, e Engine) {
	for _, c := range []struct {
		name   string
		listed bool // the second record knows the first listed the attempt
	}{{"FirstHeard", true}, {"FirstAnswerLost", false}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db := e.Open(t)
			clk := newClock(e, db)
			record(t, db, delivery("ota", "k", "h"), dispatchDay)
			first := leaseOne(t, db, clk.Now())
			started := clk.Now()
			clk.Add(2 * time.Minute)
			newer := leaseOne(t, db, clk.Now())
			a := storage.Attempt{Source: "ota", Key: "k", Delivery: first.Delivery, StartedAt: started, Duration: time.Second, Status: 200}
			for _, step := range []struct {
				job   storage.Job
				res   storage.AttemptResult
				moved bool
			}{{first, storage.AttemptResult{Done: true}, false}, {newer, storage.AttemptResult{Done: true, Listed: c.listed}, true}} {
				if moved, err := db.FinishAttempt(ctx, step.job, a, step.res); err != nil || moved != step.moved {
					t.Fatalf("record: moved %v, %v; want %v", moved, err, step.moved)
				}
			}
			if as, err := db.Attempts(ctx, "ota", "k"); err != nil || len(as) != 1 || as[0].Status != 200 || as[0].Error != "" {
				t.Errorf("history %+v, %v; want the one hand-off, answered 200", as, err)
			}
			if c, err := db.Claim(ctx, "ota", "k"); err != nil || c.State != storage.StateProcessed || c.Attempts != 1 {
				t.Errorf("claim %+v, %v; want processed after 1 attempt", c, err)
			}
		})
	}
}

// TestFinishAttempt_LateOutcomesAfterReclaim: a key released at its lease's very end
// and claimed anew in that millisecond, then two leases of the new claim each cut
// off: when both stalled processes report late, each outcome takes its own
// interrupted row's place.
func TestFinishAttempt_LateOutcomesAfterReclaim(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "k", "h"), dispatchDay)
	j1 := leaseOne(t, db, clk.Now())
	start1 := clk.Now()
	clk.Set(j1.Lease)
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k", Actor: "sam", Reason: "r",
		StuckBefore: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if d := record(t, db, delivery("ota", "k", "h2"), dispatchDay); d.Outcome != storage.Accepted {
		t.Fatalf("re-claim %s", d.Outcome)
	}
	clk.Add(time.Millisecond)
	js := lease(t, db, clk.Now(), time.Minute, 10)
	if len(js) != 1 {
		t.Fatalf("leased %v", jobKeys(js))
	}
	j2 := js[0]
	start2 := clk.Now()
	clk.Set(j2.Lease)
	js = lease(t, db, clk.Now(), time.Minute, 10)
	if len(js) != 1 {
		t.Fatalf("leased %v", jobKeys(js))
	}
	if got, want := attemptErrors(t, db, "ota", "k"), []string{storage.AttemptInterrupted, storage.AttemptInterrupted}; !slices.Equal(got, want) {
		t.Fatalf("history %q, want two interrupted", got)
	}
	clk.Add(time.Second)
	fin := func(j storage.Job, started time.Time, errText string) {
		t.Helper()
		moved, err := db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery,
			StartedAt: started, Status: 500, Error: errText}, storage.AttemptResult{NextAt: clk.Now().Add(time.Hour), LastError: errText})
		if err != nil || moved {
			t.Fatalf("late outcome: moved %v, %v", moved, err)
		}
	}
	fin(j2, start2, "late2")
	fin(j1, start1, "late1")
	if got, want := attemptErrors(t, db, "ota", "k"), []string{"late1", "late2"}; !slices.Equal(got, want) {
		t.Errorf("history %q, want %q", got, want)
	}
}

// TestFinishAttempt_LateOutcomeReleaseRace: stalled attempts report late while another
// replica releases or reprocesses their keys: each key's history holds the late outcome once.
func TestFinishAttempt_LateOutcomeReleaseRace(t *testing.T, e Engine) {
	lateOutcomesBeside(t, e, 90*time.Second, func(b storage.Store, now time.Time) {
		for i := range replicaKeys {
			_, _ = b.ReleaseKey(context.Background(), storage.Release{Source: "ota", Key: spreadName(i), Actor: "sam", Reason: "r",
				Reprocess: i%2 == 0, StuckBefore: now.Add(time.Hour)})
		}
	})
}
