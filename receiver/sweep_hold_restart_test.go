package receiver_test

import (
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestSweeps_HoldOutlivesARestart: the clock leaps a year ahead while serve runs, the
// sweeps hold, and deliveries go on arriving, stamped by that clock. serve is restarted
// (a deploy, an operator looking into the error) with the clock still ahead: the
// newest delivery, stamped by the clock in doubt, does not make it look right, and the
// sweeps hold on, the hour-old deliveries kept. With the clock set right before the
// restart, they delete by it at once; set back only part of the way, still more than
// retention ahead, they hold.
func TestSweeps_HoldOutlivesARestart(t *testing.T) {
	for _, c := range []struct {
		name string
		back time.Duration
		left int
		held bool
	}{
		{"ClockStillAhead", 0, 11, true},
		{"ClockSetRight", 365 * 24 * time.Hour, 11, false},
		{"ClockSetBackPartly", 363 * 24 * time.Hour, 11, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, clock, before := heldAfterAYearsLeap(t)
			storagetest.Record(t, db, &storage.Delivery{Source: "ota", Key: "during_hold", KeyMethod: "event_id",
				PayloadHash: "h", ContentType: "application/json", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour})
			before.stop()
			clock.Add(-c.back)
			s := startSweeps(t, db, clock, time.Hour)
			s.next()
			s.next()
			if n := s.deliveries(t); n != c.left {
				t.Errorf("restarted: %d deliveries left, want %d; logged:\n%s", n, c.left, s.logs.String())
			}
			if held := s.stepMetric(t) > 0; held != c.held {
				t.Errorf("restarted: held %v, want %v; logged:\n%s", held, c.held, s.logs.String())
			}
		})
	}
}

// TestSweeps_HoldCountsAcrossRestarts: serve was down for longer than retention (its
// clock was right), so each start holds the sweeps; it is stopped again before the
// hold has run out, as a server stopped each night is. The hold counts from when it
// began, not from each start: once it has stood that long, the clock is taken for
// right and retention deletes again, rather than never.
func TestSweeps_HoldCountsAcrossRestarts(t *testing.T) {
	db, clock := loadReceivedAgo(t, 48*time.Hour)
	const hold = time.Second
	began := time.Now()
	for run := range 2 {
		s := startSweeps(t, db, clock, hold)
		s.next()
		s.next()
		if n := s.deliveries(t); n != 10 {
			t.Fatalf("run %d, within the hold: %d deliveries, want 10", run, n)
		}
		s.stop()
		time.Sleep(hold / 4)
	}
	if time.Since(began) >= hold {
		t.Skip("the machine is too slow for this test's timing")
	}
	time.Sleep(hold - time.Since(began) + 50*time.Millisecond)
	s := startSweeps(t, db, clock, hold)
	s.next()
	s.next()
	if n := s.deliveries(t); n != 0 {
		t.Errorf("started once the hold had stood %s over runs each shorter: %d deliveries left, want 0 (taken for right); logged:\n%s",
			hold, n, s.logs.String())
	}
}

// TestSweeps_StoredHoldNotWrittenByThisCode: the stored hold holds what no run wrote
// (a hand-edited settings row, a restore of another server's table). A restart checks
// the clock as it does with no hold stored, and holds for the year's leap; it does not
// take the junk for a hold begun long ago, run out, and delete by the clock in doubt.
func TestSweeps_StoredHoldNotWrittenByThisCode(t *testing.T) {
	for _, junk := range []string{"0 0", "-5 -9", "1 2", "1700000000000 1800000000000", "x y", " "} {
		t.Run(junk, func(t *testing.T) {
			db, clock, before := heldAfterAYearsLeap(t)
			before.stop()
			if err := db.SetSetting(t.Context(), "sweep_clock_held", junk); err != nil {
				t.Fatal(err)
			}
			s := startSweeps(t, db, clock, time.Hour)
			s.next()
			s.next()
			if n := s.deliveries(t); n != 10 {
				t.Errorf("restarted: %d deliveries left, want 10; logged:\n%s", n, s.logs.String())
			}
			if s.stepMetric(t) == 0 {
				t.Errorf("restarted: not held; logged:\n%s", s.logs.String())
			}
		})
	}
}

// heldAfterAYearsLeap starts the sweeps over hour-old deliveries, leaps the clock a year
// ahead, and returns them holding their deletes, still running.
func heldAfterAYearsLeap(t *testing.T) (*sqlite.DB, *hostileClock, *steppedSweeps) {
	t.Helper()
	db, clock := loadHourOld(t)
	s := startSweeps(t, db, clock, time.Hour)
	s.next()
	clock.Add(365 * 24 * time.Hour)
	s.next()
	s.next()
	if s.stepMetric(t) == 0 {
		t.Fatal("the sweeps did not hold after the step")
	}
	return db, clock, s
}
