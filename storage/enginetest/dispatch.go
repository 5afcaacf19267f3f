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

var dispatchDay = storage.ClaimOptions{TTL: 24 * time.Hour, Dispatch: true}

// jobKeys are the keys of jobs, in order.
func jobKeys(jobs []storage.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Key
	}
	return out
}

// lease leases up to limit jobs due at now, for lease, and fails the test on an error.
func lease(t *testing.T, db storage.Store, now time.Time, d time.Duration, limit int) []storage.Job {
	t.Helper()
	jobs, err := db.LeaseDue(context.Background(), now, d, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// leaseOne leases at now, for a minute, the one key due, and fails the test unless
// exactly one was.
func leaseOne(t *testing.T, db storage.Store, now time.Time) storage.Job {
	t.Helper()
	jobs := lease(t, db, now, time.Minute, 10)
	if len(jobs) != 1 {
		t.Fatalf("leased %v; want one key", jobKeys(jobs))
	}
	return jobs[0]
}

// TestLeaseDue: the queue hands out the keys due, oldest first, each with the payload to
// send, and skips a leased key until its lease ends; NextDue says when the next falls
// due.
func TestLeaseDue(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	if next, err := db.NextDue(ctx, nil); err != nil || !next.IsZero() {
		t.Fatalf("NextDue of an empty queue = %v, %v; want the zero time", next, err)
	}
	start := clk.Now()
	first := record(t, db, delivery("ota", "k1", "h1"), dispatchDay)
	record(t, db, delivery("ota", "record-only", "h"), day) // never queued
	clk.Add(time.Second)
	record(t, db, delivery("ota", "k2", "h2"), dispatchDay)
	record(t, db, delivery("ota", "k2", "h2"), dispatchDay) // a duplicate queues nothing
	clk.Add(time.Second)
	batch := items("pms", "b0", "b1")
	if err := db.RecordBatch(ctx, batch, dispatchDay); err != nil {
		t.Fatal(err)
	}
	if next, err := db.NextDue(ctx, nil); err != nil || !next.Equal(start) {
		t.Fatalf("NextDue = %v, %v; want the first key's receipt, %v", next, err, start)
	}
	if jobs := lease(t, db, start.Add(-time.Millisecond), time.Minute, 10); len(jobs) != 0 {
		t.Fatalf("leased %v before anything was due", jobKeys(jobs))
	}

	now := clk.Now()
	jobs := lease(t, db, now, time.Minute, 2)
	if got := jobKeys(jobs); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Fatalf("first lease: %v, want the two oldest, k1 and k2", got)
	}
	c, err := db.Claim(ctx, "ota", "k1")
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[0]
	if j.ClaimID != c.ID || j.Source != "ota" || j.Delivery != first.ID || !j.Stored || j.DeliverySource != "ota" ||
		j.DeliveryKey != "k1" || j.ContentType != "application/json" || string(j.Body) != string(first.Body) ||
		j.Attempts != 0 || !j.Generation.Equal(c.ClaimedAt) || j.Batch != 0 {
		t.Fatalf("job %+v; want claim %d's, with delivery %d's payload", j, c.ID, first.ID)
	}
	if !c.NextAttemptAt.Equal(now.Add(time.Minute)) {
		t.Errorf("leased key due at %v, want the lease's end %v", c.NextAttemptAt, now.Add(time.Minute))
	}

	rest := lease(t, db, now, time.Minute, 10)
	if got := jobKeys(rest); !slices.Equal(got, []string{"b0", "b1"}) {
		t.Fatalf("second lease: %v, want the batch's keys only (the others are leased)", got)
	}
	if b := rest[1]; b.Batch != batch[0].ID || b.BatchIndex != 1 || b.Source != "pms" || b.Delivery != batch[1].ID {
		t.Errorf("batch item's job %+v; want batch %d index 1", b, batch[0].ID)
	}
	if again := lease(t, db, now.Add(time.Minute-time.Millisecond), time.Minute, 10); len(again) != 0 {
		t.Fatalf("leased %v again before their leases ended", jobKeys(again))
	}
	if next, err := db.NextDue(ctx, nil); err != nil || !next.Equal(now.Add(time.Minute)) {
		t.Fatalf("NextDue = %v, %v; want the end of the leases, %v", next, err, now.Add(time.Minute))
	}

	// A dispatcher that died holding them loses nothing: at the lease's end they are due.
	later := now.Add(time.Minute)
	if again := lease(t, db, later, time.Minute, 10); !slices.Equal(jobKeys(again), []string{"k1", "k2", "b0", "b1"}) {
		t.Fatalf("after the leases ended: %v, want every key again", jobKeys(again))
	}
}

// TestLeaseDue_Sources: a dispatcher that names its sources leases and waits for their
// keys only: the keys of a source it does not know stay as they are, due, for a replica
// that knows it. No source named leases nothing; nil names every source.
func TestLeaseDue_Sources(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "o1", "h"), dispatchDay)
	clk.Add(time.Second)
	start := clk.Now()
	record(t, db, delivery("pms", "p1", "h"), dispatchDay)
	if err := db.RecordBatch(ctx, items("pms", "p2", "p3"), dispatchDay); err != nil {
		t.Fatal(err)
	}
	record(t, db, delivery("it's \"odd\"", "q1", "h"), dispatchDay)
	clk.Add(time.Second)
	now := clk.Now()

	if next, err := db.NextDue(ctx, []string{"pms"}); err != nil || !next.Equal(start) {
		t.Fatalf("NextDue of pms = %v, %v; want its first key's receipt, %v", next, err, start)
	}
	if next, err := db.NextDue(ctx, []string{"gone"}); err != nil || !next.IsZero() {
		t.Fatalf("NextDue of a source with no keys = %v, %v; want the zero time", next, err)
	}
	if next, err := db.NextDue(ctx, []string{}); err != nil || !next.IsZero() {
		t.Fatalf("NextDue of no source = %v, %v; want the zero time", next, err)
	}
	if jobs, err := db.LeaseDue(ctx, now, time.Minute, 10, []string{}); err != nil || len(jobs) != 0 {
		t.Fatalf("leased %v, %v for no source; want nothing", jobKeys(jobs), err)
	}
	// The oldest first across the sources named, the limit over all of them.
	jobs, err := db.LeaseDue(ctx, now, time.Minute, 2, []string{"it's \"odd\"", "ota", "pms"})
	if err != nil {
		t.Fatal(err)
	}
	if got := jobKeys(jobs); !slices.Equal(got, []string{"o1", "p1"}) {
		t.Fatalf("leased %v with a limit of 2, want the two oldest, o1 and p1", got)
	}
	now = now.Add(time.Minute)
	jobs, err = db.LeaseDue(ctx, now, time.Minute, 10, []string{"pms", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if got := jobKeys(jobs); !slices.Equal(got, []string{"p1", "p2", "p3"}) {
		t.Fatalf("leased %v for pms, want p1, p2, p3 and nothing of ota", got)
	}
	jobs, err = db.LeaseDue(ctx, now, time.Minute, 10, []string{"it's \"odd\""})
	if err != nil || !slices.Equal(jobKeys(jobs), []string{"q1"}) {
		t.Fatalf("leased %v, %v for a source named with quotes; want q1", jobKeys(jobs), err)
	}
	if c, err := db.Claim(ctx, "ota", "o1"); err != nil || c.State != storage.StateProcessing || c.NextAttemptAt.After(now) {
		t.Fatalf("ota's key: %+v, %v; want it processing and due, untouched since its first lease", c, err)
	}
	if next, err := db.NextDue(ctx, []string{"ota", "pms"}); err != nil || !next.Equal(now) {
		t.Fatalf("NextDue of ota and pms = %v, %v; want ota's key, due at %v", next, err, now)
	}
	// A configuration of a thousand sources, more than one SQL compound may join.
	many := []string{"pms"}
	for i := range 1200 {
		many = append(many, fmt.Sprintf("s%04d", i))
	}
	many = append(many, "ota")
	if next, err := db.NextDue(ctx, many); err != nil || !next.Equal(now) {
		t.Fatalf("NextDue of %d sources = %v, %v; want ota's key, due at %v", len(many), next, err, now)
	}
	if jobs, err := db.LeaseDue(ctx, now.Add(-time.Second), time.Minute, 10, many); err != nil || len(jobs) != 0 {
		t.Fatalf("leased %v, %v of %d sources before anything was due; want nothing", jobKeys(jobs), err, len(many))
	}
	if jobs, err := db.LeaseDue(ctx, now, time.Minute, 10, many); err != nil || !slices.Equal(jobKeys(jobs), []string{"o1"}) {
		t.Fatalf("leased %v, %v of %d sources, want ota's o1 (the others are leased)", jobKeys(jobs), err, len(many))
	}
}

// TestDispatcherSeen: the sources forwarded are those of the dispatchers seen since the
// time asked about, as each last said; a dispatcher not seen for
// storage.DispatcherForgetAfter is forgotten at the next sighting of any, one seen just
// before that is kept.
func TestDispatcherSeen(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	now := db.Clock()
	forwarded := func(since time.Time, want ...string) {
		t.Helper()
		got, err := db.ForwardedSources(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("forwarded since %v: %v, want %v", since, got, want)
		}
	}
	forwarded(now.Add(-time.Hour))
	for _, d := range []struct {
		id      string
		sources []string
		at      time.Time
	}{
		{"a", []string{"ota", "pms"}, now},
		{"b", []string{"ota", "cm"}, now.Add(-time.Minute)},
		{"c", nil, now},
		{"old", []string{"stripe"}, now.Add(-storage.DispatcherForgetAfter - time.Minute)},
		{"kept", []string{"adyen"}, now.Add(-storage.DispatcherForgetAfter + time.Minute)},
		{"older", []string{"mews"}, now.Add(-25 * time.Hour)}, // forgets none: it is the oldest
	} {
		if err := db.DispatcherSeen(ctx, d.id, d.sources, d.at); err != nil {
			t.Fatal(err)
		}
	}
	forwarded(now.Add(-2*time.Minute), "cm", "ota", "pms")
	forwarded(now.Add(-30*time.Second), "ota", "pms")
	forwarded(now.Add(time.Second))
	forwarded(now.Add(-48*time.Hour), "adyen", "cm", "mews", "ota", "pms", "stripe")
	// a stops forwarding pms; the dispatchers not seen for longer than
	// DispatcherForgetAfter are forgotten at the next sighting.
	if err := db.DispatcherSeen(ctx, "a", []string{"ota"}, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	forwarded(now.Add(-30*time.Second), "ota")
	forwarded(now.Add(-48*time.Hour), "adyen", "cm", "ota")
}

// TestUnknownMigrations: a database this build set up records no migration it does not
// have; once a newer version records its own, they are named, in order, to a handle
// opened before, as to one on another replica.
func TestUnknownMigrations(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	other := e.Reopen(t, db)
	if got, err := db.UnknownMigrations(ctx); err != nil || len(got) != 0 {
		t.Fatalf("unknown migrations of a database this build set up: %q, %v; want none", got, err)
	}
	e.AddMigration(t, db, "migrations/9999_later.sql")
	e.AddMigration(t, db, "migrations/9998_later.sql")
	for _, h := range []storage.Store{db, other} {
		got, err := h.UnknownMigrations(ctx)
		if err != nil || !slices.Equal(got, []string{"migrations/9998_later.sql", "migrations/9999_later.sql"}) {
			t.Fatalf("unknown migrations once a newer version migrated: %q, %v; want 9998 and 9999", got, err)
		}
	}
}

// TestFinishAttempt_RecordedAgain: an attempt recorded a second time (its first record
// committed but the answer was lost, and the dispatcher, which keeps an outcome it could
// not record, records it again) leaves one attempt in the key's history, moved on once:
// a success, a retry, whose record changes no other mark of the job's than the count
// of attempts, and the settlement of a key no downstream had (Unsent), which that count
// leaves as it was.
func TestFinishAttempt_RecordedAgain(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "done", "h"), dispatchDay)
	record(t, db, delivery("ota", "retry", "h"), dispatchDay)
	record(t, db, delivery("ota", "unsent", "h"), dispatchDay)
	jobs := map[string]storage.Job{}
	for _, j := range lease(t, db, clk.Now(), time.Minute, 10) {
		jobs[j.Key] = j
	}
	for _, tc := range []struct {
		key      string
		a        storage.Attempt
		res      storage.AttemptResult
		state    string
		attempts int
	}{
		{"done", storage.Attempt{Status: 200}, storage.AttemptResult{Done: true}, storage.StateProcessed, 1},
		{"retry", storage.Attempt{Status: 500, Error: "downstream answered 500 Internal Server Error"},
			storage.AttemptResult{NextAt: clk.Now().Add(2 * time.Second), LastError: "downstream answered 500 Internal Server Error"},
			storage.StateProcessing, 1},
		{"unsent", storage.Attempt{Response: "record only: the source has no forward_url"},
			storage.AttemptResult{Done: true, Unsent: true}, storage.StateProcessed, 0},
	} {
		j, ok := jobs[tc.key]
		if !ok {
			t.Fatalf("%s not leased: %+v", tc.key, jobs)
		}
		a := tc.a
		a.Source, a.Key, a.Delivery, a.StartedAt, a.Duration = j.Source, j.Key, j.Delivery, clk.Now(), time.Second
		for i, want := range []bool{true, false} {
			moved, err := db.FinishAttempt(ctx, j, a, tc.res)
			if err != nil || moved != want {
				t.Fatalf("%s: record %d: moved %v, %v; want %v", tc.key, i+1, moved, err, want)
			}
		}
		as, err := db.Attempts(ctx, "ota", tc.key)
		if err != nil || len(as) != 1 {
			t.Fatalf("%s: attempts %+v, %v; want the one", tc.key, as, err)
		}
		if c, err := db.Claim(ctx, "ota", tc.key); err != nil || c.Attempts != tc.attempts || c.State != tc.state {
			t.Fatalf("%s: claim %+v, %v; want %s, %d attempts counted", tc.key, c, err, tc.state, tc.attempts)
		}
	}
}

// TestFinishAttempt: an attempt is recorded and moves its key on (retry, processed,
// failed); a key that changed meanwhile is left as it is, its attempt still recorded.
func TestFinishAttempt(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	for _, k := range []string{"retry", "done", "fail", "released", "reclaimed", "reprocessed"} {
		record(t, db, delivery("ota", k, "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	}
	jobs := map[string]storage.Job{}
	for _, j := range lease(t, db, clk.Now(), time.Minute, 10) {
		jobs[j.Key] = j
	}
	if len(jobs) != 6 {
		t.Fatalf("leased %d jobs, want 6", len(jobs))
	}
	if _, err := db.LastAttempt(ctx, "ota", "retry"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("LastAttempt before any attempt: %v, want ErrNotFound", err)
	}
	finish := func(key string, a storage.Attempt, res storage.AttemptResult) bool {
		t.Helper()
		j := jobs[key]
		a.Source, a.Key, a.Delivery = j.Source, j.Key, j.Delivery
		moved, err := db.FinishAttempt(ctx, j, a, res)
		if err != nil {
			t.Fatalf("finish %s: %v", key, err)
		}
		return moved
	}
	clk.Add(time.Second)
	next := clk.Now().Add(2 * time.Second)
	first := storage.Attempt{StartedAt: clk.Now(), Duration: 1500 * time.Millisecond, Status: 503,
		Error: "downstream answered 503 Service Unavailable", Response: "try later"}
	if !finish("retry", first, storage.AttemptResult{NextAt: next, LastError: first.Error}) {
		t.Fatal("a retry did not move its key")
	}
	c, err := db.Claim(ctx, "ota", "retry")
	if err != nil {
		t.Fatal(err)
	}
	if c.State != storage.StateProcessing || c.Attempts != 1 || !c.NextAttemptAt.Equal(next) || c.LastError != first.Error {
		t.Fatalf("after a retry: %+v; want processing, 1 attempt, due at %v", c, next)
	}
	jobs["retry"] = lease(t, db, next, time.Minute, 10)[0]
	if jobs["retry"].Attempts != 1 {
		t.Fatalf("the retried job says %d attempts before it, want 1", jobs["retry"].Attempts)
	}
	second := storage.Attempt{StartedAt: next, Duration: 20 * time.Millisecond, Status: 200, Response: "ok"}
	if !finish("retry", second, storage.AttemptResult{Done: true}) {
		t.Fatal("a success did not move its key")
	}
	if c, _ := db.Claim(ctx, "ota", "retry"); c.State != storage.StateProcessed || c.Attempts != 2 || !c.NextAttemptAt.IsZero() ||
		c.LastError != "" || !c.UpdatedAt.Equal(clk.Now()) {
		t.Fatalf("after a success: %+v; want processed, 2 attempts, not due, no error", c)
	}
	atts, err := db.Attempts(ctx, "ota", "retry")
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 || atts[0].Status != 503 || atts[0].Duration != first.Duration || !atts[0].StartedAt.Equal(first.StartedAt) ||
		atts[0].Error != first.Error || atts[0].Response != "try later" || atts[0].Delivery != jobs["retry"].Delivery ||
		atts[1].Status != 200 || atts[1].ID <= atts[0].ID {
		t.Fatalf("attempts %+v; want the 503 then the 200, oldest first", atts)
	}
	if last, err := db.LastAttempt(ctx, "ota", "retry"); err != nil || last.ID != atts[1].ID {
		t.Fatalf("LastAttempt = %+v, %v; want the 200", last, err)
	}

	if !finish("done", storage.Attempt{StartedAt: clk.Now(), Status: 204}, storage.AttemptResult{Done: true}) {
		t.Fatal("done did not move")
	}
	if !finish("fail", storage.Attempt{StartedAt: clk.Now(), Error: "connection refused"},
		storage.AttemptResult{Failed: true, LastError: "connection refused"}) {
		t.Fatal("fail did not move")
	}
	if c, _ := db.Claim(ctx, "ota", "fail"); c.State != storage.StateFailed || c.LastError != "connection refused" ||
		c.Attempts != 1 || !c.NextAttemptAt.IsZero() {
		t.Fatalf("after the last attempt failed: %+v; want failed with its error", c)
	}

	// Released while its attempt ran: the release stands.
	clk.Add(time.Hour - time.Second) // every key has expired; processing ones are stuck
	rel := storage.Release{Source: "ota", Key: "released", Actor: "sam", Reason: "r", StuckBefore: clk.Now()}
	if _, err := db.ReleaseKey(ctx, rel); err != nil {
		t.Fatal(err)
	}
	if finish("released", storage.Attempt{StartedAt: clk.Now(), Status: 200}, storage.AttemptResult{Done: true}) {
		t.Error("an attempt moved a key released during it")
	}
	if c, _ := db.Claim(ctx, "ota", "released"); c.State != storage.StateReleased {
		t.Errorf("released key is %s after a late attempt", c.State)
	}
	// Reprocessed while its attempt ran (the key looked stuck): the reprocess stands,
	// due now with no attempt counted, whatever the attempt that began before it did.
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "reprocessed", Actor: "sam", Reason: "r",
		Reprocess: true, StuckBefore: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	reprocessedAt := clk.Now()
	clk.Add(time.Millisecond)
	if finish("reprocessed", storage.Attempt{StartedAt: clk.Now(), Status: 200}, storage.AttemptResult{Done: true}) {
		t.Error("an attempt begun before a reprocess moved the key")
	}
	if c, _ := db.Claim(ctx, "ota", "reprocessed"); c.State != storage.StateProcessing || c.Attempts != 0 ||
		!c.NextAttemptAt.Equal(reprocessedAt) {
		t.Errorf("reprocessed key after an earlier attempt ended: %s, %d attempts, due %v; want processing, 0 attempts, due %v",
			c.State, c.Attempts, c.NextAttemptAt, reprocessedAt)
	}
	// Claimed anew (another generation) while an old attempt ran: the new claim stands.
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "reclaimed", Actor: "sam", Reason: "r",
		StuckBefore: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	record(t, db, delivery("ota", "reclaimed", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	if finish("reclaimed", storage.Attempt{StartedAt: clk.Now(), Status: 200}, storage.AttemptResult{Done: true}) {
		t.Error("an old claim's attempt moved the key claimed anew")
	}
	if c, _ := db.Claim(ctx, "ota", "reclaimed"); c.State != storage.StateProcessing || c.Attempts != 0 {
		t.Errorf("the new claim is %s with %d attempts after the old one's attempt", c.State, c.Attempts)
	}
	for _, k := range []string{"released", "reclaimed", "reprocessed"} {
		if atts, err := db.Attempts(ctx, "ota", k); err != nil || len(atts) != 1 {
			t.Errorf("%s: %d attempts, %v; the late attempt is still recorded", k, len(atts), err)
		}
	}
	if atts, err := db.Attempts(ctx, "ota", "nope"); err != nil || len(atts) != 0 {
		t.Errorf("attempts of an unknown key: %v, %v", atts, err)
	}
}

// TestFinishAttempt_LeaseOutlived: an attempt that outlives its lease (a stalled
// process, a slow disk) while another dispatcher leases the key again cannot move the
// key: not to a retry that would let a third dispatcher lease it beside the second, nor
// to processed while the second's attempt is out. A key with an attempt under way is
// refused release and reprocess even once it is stuck, and freed again when the attempt
// is recorded. Each lease of a key ends after the one before it, whatever was asked.
func TestFinishAttempt_LeaseOutlived(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "k", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	t0 := clk.Now()
	first := lease(t, db, t0, time.Minute, 10)
	clk.Add(2 * time.Minute) // the first lease ran out with its attempt still out
	second := lease(t, db, clk.Now(), time.Minute, 10)
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("leased %d, then %d jobs after the lease ended; want 1 and 1", len(first), len(second))
	}
	if !second[0].Lease.After(first[0].Lease) {
		t.Fatalf("the second lease ends at %v, not after the first's %v", second[0].Lease, first[0].Lease)
	}
	finish := func(j storage.Job, res storage.AttemptResult) bool {
		t.Helper()
		moved, err := db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery,
			StartedAt: t0, Status: 503, Error: res.LastError}, res)
		if err != nil {
			t.Fatal(err)
		}
		return moved
	}
	soon := clk.Now().Add(time.Second)
	if finish(first[0], storage.AttemptResult{NextAt: soon, LastError: "downstream answered 503"}) {
		t.Error("an attempt whose lease ran out moved the key another dispatcher holds")
	}
	if again := lease(t, db, soon, time.Minute, 10); len(again) != 0 {
		t.Fatalf("leased %v while the second dispatcher's lease holds", jobKeys(again))
	}
	if finish(first[0], storage.AttemptResult{Done: true}) {
		t.Error("an attempt whose lease ran out settled the key another dispatcher holds")
	}
	c, err := db.Claim(ctx, "ota", "k")
	if err != nil {
		t.Fatal(err)
	}
	if c.State != storage.StateProcessing || c.Attempts != 0 || !c.NextAttemptAt.Equal(second[0].Lease) || !c.InFlight(clk.Now()) {
		t.Fatalf("after the outlived attempts: %+v; want processing, no attempt counted, in flight until %v", c, second[0].Lease)
	}

	// Stuck (processing since before stuckBefore) with an attempt under way: refused.
	for _, reprocess := range []bool{false, true} {
		_, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k", Actor: "sam", Reason: "r",
			Reprocess: reprocess, StuckBefore: clk.Now().Add(time.Hour)})
		if !errors.Is(err, storage.ErrBusy) {
			t.Errorf("release (reprocess %v) of a stuck key with an attempt under way: %v, want ErrBusy", reprocess, err)
		}
	}
	retry := clk.Now().Add(time.Second) // before the second lease would have ended
	if !finish(second[0], storage.AttemptResult{NextAt: retry, LastError: "downstream answered 503"}) {
		t.Fatal("the attempt holding the lease did not move the key")
	}
	if c, _ := db.Claim(ctx, "ota", "k"); c.InFlight(clk.Now()) || !c.NextAttemptAt.Equal(retry) || c.Attempts != 1 {
		t.Fatalf("after the attempt was recorded: %+v; want not in flight, 1 attempt, due at %v", c, retry)
	}
	// The next lease is asked for less than the first lasted: it still ends after it.
	third := lease(t, db, retry, time.Millisecond, 10)
	if len(third) != 1 || !third[0].Lease.After(second[0].Lease) {
		t.Fatalf("third lease %+v; want one ending after %v", third, second[0].Lease)
	}
	if !finish(third[0], storage.AttemptResult{NextAt: retry.Add(time.Hour), LastError: "downstream answered 503"}) {
		t.Fatal("the third attempt did not move the key")
	}
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k", Actor: "sam", Reason: "r",
		Reprocess: true, StuckBefore: clk.Now()}); err != nil {
		t.Fatalf("reprocess of a stuck key between attempts: %v", err)
	}
}

// TestFinishAttempt_UnusualText: a downstream's answer may hold any byte, a NUL
// included; its attempt is still recorded (else the key would be sent again and again),
// and names no engine can hold find nothing rather than fail.
func TestFinishAttempt_UnusualText(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "k", "h"), dispatchDay)
	j := leaseOne(t, db, clk.Now())
	a := storage.Attempt{Source: "ota", Key: "k", Delivery: j.Delivery, StartedAt: clk.Now(), Status: 500,
		Error: "downstream answered 500: bad\x00byte", Response: "before\x00after \xff"}
	moved, err := db.FinishAttempt(ctx, j, a, storage.AttemptResult{NextAt: clk.Now().Add(time.Second), LastError: a.Error})
	if err != nil || !moved {
		t.Fatalf("an answer with a NUL byte: moved %v, %v; want its attempt recorded", moved, err)
	}
	last, err := db.LastAttempt(ctx, "ota", "k")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(last.Response, "before") || !strings.Contains(last.Response, "after") || last.Status != 500 {
		t.Errorf("recorded response %q, want the answer's text kept", last.Response)
	}
	for _, name := range []string{"a\x00b", "\xff"} {
		if atts, err := db.Attempts(ctx, "ota", name); err != nil || len(atts) != 0 {
			t.Errorf("Attempts(%q) = %v, %v; want none", name, atts, err)
		}
		if _, err := db.LastAttempt(ctx, name, "k"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("LastAttempt(%q) = %v; want ErrNotFound", name, err)
		}
		_, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: name, Actor: "sam", Reason: "r"})
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("ReleaseKey(%q) = %v; want ErrNotFound", name, err)
		}
		out, err := db.ReleaseEach(ctx, []storage.KeyRef{{Source: "ota", Key: name}, {Source: "ota", Key: "k"}},
			storage.Release{Actor: "sam", Reason: "r", StuckBefore: clk.Now()})
		if err != nil || len(out) != 2 || out[0].Refused != storage.RefusedNotFound {
			t.Errorf("ReleaseEach with %q: %+v, %v; want it not found, the other key still answered", name, out, err)
		}
		for _, f := range []storage.KeyFilter{{Source: name}, {State: name}} {
			if p, err := db.Keys(ctx, f); err != nil || len(p.Keys) != 0 {
				t.Errorf("Keys(%+v) = %d keys, %v; want none", f, len(p.Keys), err)
			}
			if ks, err := db.ListKeys(ctx, f); err != nil || len(ks) != 0 {
				t.Errorf("ListKeys(%+v) = %d keys, %v; want none", f, len(ks), err)
			}
		}
	}
}

// TestLeaseDue_Replicas: dispatchers on two replicas of one database, several each,
// lease at once over many due keys: no key is leased to two of them, and every key is
// leased. A replica that dies holding its keys loses them to the other once the lease
// ends, under the same job (claim and generation), and its own late attempt then moves
// nothing.
func TestLeaseDue_Replicas(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	clk := newClock(e, a)
	b := e.Reopen(t, a)
	const keys, workers, limit = 300, 3, 4
	batch := make([]*storage.Delivery, 0, 100)
	for i := range keys {
		batch = append(batch, delivery("ota", fmt.Sprintf("k%03d", i), "h"))
		if len(batch) == cap(batch) {
			if err := a.RecordBatch(ctx, batch, dispatchDay); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	now := clk.Now()
	const leaseFor = time.Minute

	var mu sync.Mutex
	holder := map[string]int{} // key → the worker that leased it
	var twice []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 2 * workers {
		db := a
		if w%2 == 1 {
			db = b
		}
		wg.Go(func() {
			<-start
			for range keys { // bounded: each round leases at least one key or ends
				var sources []string // every source, or by source: both ways skip what another holds
				if w%4 >= 2 {
					sources = []string{"cm", "ota"}
				}
				jobs, err := db.LeaseDue(ctx, now, leaseFor, limit, sources)
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					if other, ok := holder[j.Key]; ok {
						twice = append(twice, fmt.Sprintf("%s (workers %d and %d)", j.Key, other, w))
					}
					holder[j.Key] = w
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(twice) > 0 {
		t.Fatalf("%d keys leased twice at once: %v", len(twice), twice[:min(5, len(twice))])
	}
	if len(holder) != keys {
		t.Fatalf("%d keys leased, want every one of %d", len(holder), keys)
	}

	// Replica a dies holding k000. Until the lease ends b gets nothing; then b takes it,
	// as the same job.
	held := lease(t, a, now.Add(leaseFor), leaseFor, 1)
	if len(held) != 1 {
		t.Fatalf("a leased %d jobs after the first leases ended, want 1", len(held))
	}
	if jobs := lease(t, b, now.Add(2*leaseFor-time.Millisecond), leaseFor, keys); slices.Contains(jobKeys(jobs), held[0].Key) {
		t.Fatalf("b leased %s while a's lease on it ran", held[0].Key)
	}
	var taken storage.Job
	for _, j := range lease(t, b, now.Add(2*leaseFor), leaseFor, keys) {
		if j.Key == held[0].Key {
			taken = j
		}
	}
	if taken.Key == "" {
		t.Fatalf("b did not take %s once a's lease on it ended", held[0].Key)
	}
	if taken.ClaimID != held[0].ClaimID || !taken.Generation.Equal(held[0].Generation) || taken.Delivery != held[0].Delivery {
		t.Fatalf("b's job %+v is not a's %+v", taken, held[0])
	}
	att := storage.Attempt{Source: taken.Source, Key: taken.Key, Delivery: taken.Delivery, StartedAt: clk.Now(), Status: 200}
	if moved, err := b.FinishAttempt(ctx, taken, att, storage.AttemptResult{Done: true}); err != nil || !moved {
		t.Fatalf("b's attempt: moved %v, %v", moved, err)
	}
	if moved, err := a.FinishAttempt(ctx, held[0], att, storage.AttemptResult{NextAt: clk.Now()}); err != nil || moved {
		t.Fatalf("a's late attempt: moved %v, %v; want the processed key left as it is", moved, err)
	}
	if c, err := a.Claim(ctx, "ota", taken.Key); err != nil || c.State != storage.StateProcessed {
		t.Fatalf("%s is %s, %v; want processed", taken.Key, c.State, err)
	}
}

// TestLeaseDue_Interrupted: a hand-off whose lease runs out before its outcome is
// recorded (its process was killed mid-attempt) is recorded as interrupted, once, when
// its key is leased again, reprocessed or released: the downstream may have received
// it. An attempt recorded in time is not, even one retried exactly when its lease would
// have ended. Interrupted attempts count neither as attempts made nor as failures.
func TestLeaseDue_Interrupted(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	first := record(t, db, delivery("ota", "k", "h"), dispatchDay)
	attempts := func(want ...string) []storage.Attempt {
		t.Helper()
		atts, err := db.Attempts(ctx, "ota", "k")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range atts {
			got = append(got, a.Error)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("attempts: %q, want %q", got, want)
		}
		return atts
	}
	leaseOne := func(now time.Time) storage.Job {
		t.Helper()
		jobs := lease(t, db, now, time.Minute, 10)
		if len(jobs) != 1 {
			t.Fatalf("leased %v at %v, want k", jobKeys(jobs), now)
		}
		return jobs[0]
	}
	const failed = "downstream answered 503"
	finish := func(j storage.Job, at time.Time) bool {
		t.Helper()
		moved, err := db.FinishAttempt(ctx, j, storage.Attempt{Source: j.Source, Key: j.Key, Delivery: j.Delivery,
			StartedAt: clk.Now(), Status: 503, Error: failed}, storage.AttemptResult{NextAt: at, LastError: failed})
		if err != nil {
			t.Fatal(err)
		}
		return moved
	}
	interrupted := storage.AttemptInterrupted

	killed := leaseOne(clk.Now())
	clk.Add(time.Minute)
	again := leaseOne(clk.Now())
	a := attempts(interrupted)[0]
	if a.Delivery != first.ID || !a.StartedAt.Equal(killed.Lease) || a.Status != 0 || a.Duration != 0 || a.Response != "" {
		t.Errorf("interrupted attempt %+v; want delivery %d at the lease's end %v, no status", a, first.ID, killed.Lease)
	}
	if c, err := db.Claim(ctx, "ota", "k"); err != nil || c.Attempts != 0 {
		t.Errorf("claim %+v, %v; want no attempt counted for the interrupted one", c, err)
	}

	// Retried at the very end of its lease: recorded in time, so not interrupted.
	if !finish(again, again.Lease) {
		t.Fatal("the attempt holding the lease did not move the key")
	}
	c, err := db.Claim(ctx, "ota", "k")
	if err != nil || c.NextAttemptAt.Equal(c.LeasedUntil) {
		t.Fatalf("claim %+v, %v; want due apart from its lease's end", c, err)
	}
	clk.Set(c.NextAttemptAt) // a hand-off starts once its key is due, never with the one before
	third := leaseOne(c.NextAttemptAt)
	attempts(interrupted, failed)
	// Retried long after its lease ended: not interrupted either.
	if !finish(third, third.Lease.Add(time.Hour)) {
		t.Fatal("the third attempt did not move the key")
	}
	clk.Set(third.Lease.Add(time.Hour))
	killedAgain := leaseOne(clk.Now())
	attempts(interrupted, failed, failed)

	// Reprocessed the instant its lease ends: recorded by the reprocess, and not again
	// by the lease that follows it.
	clk.Set(killedAgain.Lease)
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k", Actor: "sam", Reason: "r",
		Reprocess: true, StuckBefore: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("reprocess: %v", err)
	}
	next := leaseOne(clk.Now().Add(time.Millisecond))
	atts := attempts(interrupted, failed, failed, interrupted)
	if !atts[3].StartedAt.Equal(killedAgain.Lease) {
		t.Errorf("reprocess recorded the interrupted attempt at %v, want its lease's end %v", atts[3].StartedAt, killedAgain.Lease)
	}
	if got, err := db.FailingStreaks(ctx, []string{"ota"}, 10); err != nil || got["ota"] != 2 {
		t.Errorf("failing streak %v, %v; want 2: interrupted attempts are not the downstream failing", got, err)
	}

	// Released once its lease ran out: recorded by the release.
	clk.Set(next.Lease.Add(time.Second))
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k", Actor: "sam", Reason: "r",
		StuckBefore: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("release: %v", err)
	}
	attempts(interrupted, failed, failed, interrupted, interrupted)
	if jobs := lease(t, db, clk.Now().Add(time.Hour), time.Minute, 10); len(jobs) != 0 {
		t.Fatalf("leased %v after the release", jobKeys(jobs))
	}
	// Its process was only stalled and records the outcome after all: the outcome takes
	// the place of that lease's interrupted attempt, and of no other.
	if finish(next, clk.Now()) {
		t.Fatal("a late attempt moved the released key")
	}
	attempts(interrupted, failed, failed, interrupted, failed)
}

// TestYieldLease: a lease given back unused (the dispatcher stalled past it before its
// hand-off) leaves the key due at once, and the next lease, taken before the given
// lease's end, lists no interrupted attempt, as nothing was handed off. A lease given
// back once it was taken again, or settled, leaves the key as it is.
func TestYieldLease(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	clk := newClock(e, db)
	record(t, db, delivery("ota", "k", "h"), storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	first := leaseOne(t, db, clk.Now())
	if given, err := db.YieldLease(ctx, first); err != nil || !given {
		t.Fatalf("yield the lease held: given %v, %v; want given", given, err)
	}
	second := leaseOne(t, db, clk.Now())
	if !second.Lease.After(first.Lease) {
		t.Errorf("the lease after the one given back ends at %v, not after %v", second.Lease, first.Lease)
	}
	if as, err := db.Attempts(ctx, "ota", "k"); err != nil || len(as) != 0 {
		t.Errorf("after a lease given back unused: attempts %+v, %v; want none", as, err)
	}
	if given, err := db.YieldLease(ctx, first); err != nil || given {
		t.Errorf("yield a lease taken again since: given %v, %v; want not", given, err)
	}
	if again := lease(t, db, clk.Now(), time.Minute, 10); len(again) != 0 {
		t.Errorf("leased %v while the second lease holds", jobKeys(again))
	}
	if moved, err := db.FinishAttempt(ctx, second, storage.Attempt{Source: "ota", Key: "k", Delivery: second.Delivery,
		StartedAt: clk.Now(), Status: 202}, storage.AttemptResult{Done: true}); err != nil || !moved {
		t.Fatalf("finish under the second lease: moved %v, %v", moved, err)
	}
	if given, err := db.YieldLease(ctx, second); err != nil || given {
		t.Errorf("yield the lease of a key settled: given %v, %v; want not", given, err)
	}
	if c, err := db.Claim(ctx, "ota", "k"); err != nil || c.State != "processed" {
		t.Errorf("key %+v, %v; want processed", c, err)
	}
}
