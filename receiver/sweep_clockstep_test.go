package receiver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// steppedSweeps runs the background sweeps over a real database with ten deliveries
// received an hour ago, one round each time next is called: next returns once the
// round before it has finished.
type steppedSweeps struct {
	db     *sqlite.DB
	clock  *hostileClock
	m      *receiver.Metrics
	rounds chan struct{}
	logs   *syncBuffer
	stop   func() // ends the sweeps, as stopping serve does; the test's cleanup does too
}

func loadHourOld(t *testing.T) (*sqlite.DB, *hostileClock) {
	t.Helper()
	return loadReceivedAgo(t, time.Hour)
}

func loadReceivedAgo(t *testing.T, ago time.Duration) (*sqlite.DB, *hostileClock) {
	t.Helper()
	ctx := context.Background()
	db := storagetest.Open(t)
	clock := &hostileClock{}
	db.Now = clock.Now
	err := storagetest.BulkLoad(ctx, db, storagetest.Fill{Source: "ota", Keys: 10,
		Key:       func(i int) string { return fmt.Sprintf("evt_%02d", i) },
		ClaimedAt: time.Now().Add(-ago), TTL: 24 * time.Hour,
		Headers: "{}", Body: func(int) []byte { return []byte(`{}`) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// As serve's roll-up loop would have: retention deletes nothing not counted.
	if _, err := db.RollupStats(ctx, 10000); err != nil {
		t.Fatal(err)
	}
	return db, clock
}

func startSweeps(t *testing.T, db *sqlite.DB, clock *hostileClock, hold time.Duration) *steppedSweeps {
	t.Helper()
	s := &steppedSweeps{db: db, clock: clock, m: receiver.NewMetrics(nil), rounds: make(chan struct{}), logs: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	now := func() time.Time {
		select {
		case <-s.rounds:
		case <-ctx.Done():
		}
		return clock.Now()
	}
	go func() {
		receiver.RunSweeps(ctx, db, receiver.SweepConfig{Every: time.Millisecond, Retention: 24 * time.Hour,
			ClockStepHold: hold, Now: now}, s.m, slog.New(slog.NewTextHandler(s.logs, nil)))
		close(done)
	}()
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(s.stop)
	s.next() // the first round has begun
	return s
}

func (s *steppedSweeps) next() {
	select {
	case s.rounds <- struct{}{}:
	case <-time.After(10 * time.Second):
		panic("the sweeps did not come round within 10 s")
	}
}

// stepMetric is hookdedup_sweep_clock_step_seconds as monitoring scrapes it.
func (s *steppedSweeps) stepMetric(t *testing.T) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	s.m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "hookdedup_sweep_clock_step_seconds "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatal("no hookdedup_sweep_clock_step_seconds in the metrics")
	return 0
}

func (s *steppedSweeps) deliveries(t *testing.T) int {
	t.Helper()
	n := 0
	if err := s.db.EachDelivery(context.Background(), storage.DeliveryFilter{}, func(storage.Delivery) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSweeps_ClockLeptForwardHoldsDeletes: the wall clock is set a year ahead while
// serve runs (a typo in date -s). The sweeps delete none of the deliveries received an
// hour before, which by that clock are far past retention; they log one error naming
// the step and set hookdedup_sweep_clock_step_seconds. Once the clock is set right
// they resume, the metric back at 0, and the deliveries are still there.
func TestSweeps_ClockLeptForwardHoldsDeletes(t *testing.T) {
	db, clock := loadHourOld(t)
	s := startSweeps(t, db, clock, time.Hour)
	s.next()
	if n := s.deliveries(t); n != 10 {
		t.Fatalf("before the step: %d deliveries, want 10", n)
	}
	clock.Add(365 * 24 * time.Hour)
	for range 3 {
		s.next()
	}
	if n := s.deliveries(t); n != 10 {
		t.Errorf("with the clock a year ahead: %d deliveries left, want all 10 (the sweeps hold)", n)
	}
	if got := s.stepMetric(t); got < 364*24*3600 {
		t.Errorf("hookdedup_sweep_clock_step_seconds = %v, want about a year", got)
	}
	if logs := s.logs.String(); strings.Count(logs, "leapt forward") != 1 || !strings.Contains(logs, "level=ERROR") {
		t.Errorf("want one error naming the step, logged:\n%s", logs)
	}
	clock.Add(-365 * 24 * time.Hour)
	s.next()
	s.next()
	if got := s.stepMetric(t); got != 0 {
		t.Errorf("with the clock set right: hookdedup_sweep_clock_step_seconds = %v, want 0", got)
	}
	if n := s.deliveries(t); n != 10 {
		t.Errorf("with the clock set right: %d deliveries, want 10", n)
	}
}

// TestSweeps_ClockStepTakenForRightAfterHold: a forward step that stands for the hold
// (the clock was right: it was behind before) is taken for right, and retention
// deletes by it again.
func TestSweeps_ClockStepTakenForRightAfterHold(t *testing.T) {
	db, clock := loadHourOld(t)
	s := startSweeps(t, db, clock, 200*time.Millisecond)
	s.next()
	clock.Add(48 * time.Hour)
	s.next()
	s.next()
	if n := s.deliveries(t); n != 10 {
		t.Fatalf("just after the step: %d deliveries, want 10", n)
	}
	time.Sleep(250 * time.Millisecond)
	s.next()
	s.next()
	if n := s.deliveries(t); n != 0 {
		t.Errorf("after the hold: %d deliveries, want 0 (past retention by the clock taken for right)", n)
	}
	if got := s.stepMetric(t); got != 0 {
		t.Errorf("after the hold: hookdedup_sweep_clock_step_seconds = %v, want 0", got)
	}
}

// TestSweeps_ClockAheadAtStartHoldsDeletes: serve starts with the clock a year ahead
// (a VM restored with a wrong clock). The newest delivery, received an hour before,
// is past retention by that clock: the sweeps hold and say so.
func TestSweeps_ClockAheadAtStartHoldsDeletes(t *testing.T) {
	db, clock := loadHourOld(t)
	clock.Add(365 * 24 * time.Hour)
	s := startSweeps(t, db, clock, time.Hour)
	s.next()
	s.next()
	if n := s.deliveries(t); n != 10 {
		t.Errorf("started with the clock a year ahead: %d deliveries left, want all 10", n)
	}
	if got := s.stepMetric(t); got < 364*24*3600 {
		t.Errorf("hookdedup_sweep_clock_step_seconds = %v, want about a year", got)
	}
	if logs := s.logs.String(); !strings.Contains(logs, "newest delivery stored") {
		t.Errorf("want an error naming the newest delivery, logged:\n%s", logs)
	}
}

// TestSweeps_StartAfterAStopChecksTheLastSweep: serve runs, sweeps, and is stopped (for
// the night, say) on a property that received nothing for a while. The deliveries
// were received 20 hours before, within retention (24 hours), so the sweeps before the
// stop deleted none. Restarted 10 hours later, the newest delivery is past retention;
// the last sweep, whose time the database kept, is not, so the clock is taken for
// right and retention deletes them (held a day instead, a server stopped each night
// would never delete again). Restarted with the clock a year ahead, the sweeps hold.
func TestSweeps_StartAfterAStopChecksTheLastSweep(t *testing.T) {
	for _, c := range []struct {
		name string
		down time.Duration
		left int
		held bool
	}{
		{"DownOvernight", 10 * time.Hour, 0, false},
		{"ClockAYearAhead", 365 * 24 * time.Hour, 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, clock := loadReceivedAgo(t, 20*time.Hour)
			before := startSweeps(t, db, clock, time.Hour)
			before.next()
			before.next() // the first round has ended
			before.stop()
			if n := before.deliveries(t); n != 10 {
				t.Fatalf("before the stop: %d deliveries, want 10 (within retention)", n)
			}
			clock.Add(c.down)
			s := startSweeps(t, db, clock, time.Hour)
			s.next()
			s.next()
			if n := s.deliveries(t); n != c.left {
				t.Errorf("restarted %s later: %d deliveries left, want %d", c.down, n, c.left)
			}
			if held := s.stepMetric(t) > 0; held != c.held {
				t.Errorf("restarted %s later: held %v, want %v; logged:\n%s", c.down, held, c.held, s.logs.String())
			}
		})
	}
}
