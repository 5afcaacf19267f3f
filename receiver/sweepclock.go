package receiver

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

const (
	// ClockStepBound is how far the wall clock may run ahead of the monotonic clock
	// between two sweeps before the sweeps hold their deletes: NTP slews a clock by
	// far less, and a step that large (a typo in date -s, a VM restored with a wrong
	// clock) would delete by retention what real time has not aged yet, for good.
	ClockStepBound = time.Hour
	// DefaultClockStepHold is how long the sweeps hold after a forward step, by the
	// monotonic clock, before they take the new time for right: long enough for an
	// operator to see the error and the metric and set the clock right.
	DefaultClockStepHold = 24 * time.Hour
)

// NewestReceived is what the guard of the sweeps needs of storage at a start.
type NewestReceived interface {
	NewestReceivedAt(ctx context.Context) (time.Time, error)
}

// clockGuard holds the sweeps' deletes while the wall clock (the sweeps' Now) stands
// further ahead than the monotonic clock has run since a time it trusted: the last
// sweep's, or at a start the newest delivery's receipt time, from which a clock
// stepped while the server was down is seen. Deletes resume at the first sweep after
// the clock is set right, or once the step has stood for hold by the monotonic clock.
// Intake never waits for it: it stamps with the clock as it is.
type clockGuard struct {
	hold time.Duration
	mono func() time.Time // time.Now: its monotonic reading, which no step of the wall clock moves

	base   time.Time     // the wall clock's time trusted, at seen
	slack  time.Duration // how far ahead of base, run on by the monotonic clock, the wall clock may be
	seen   time.Time     // monotonic reading at base; zero before the first sweep
	heldAt time.Time     // monotonic reading when the hold began; zero when not holding
}

// deletes reports whether this round of sweeps may delete, at now by the sweeps'
// clock, logging and setting the metric when a hold begins or ends.
func (g *clockGuard) deletes(ctx context.Context, st NewestReceived, now time.Time, retention time.Duration, m *Metrics, log *slog.Logger) bool {
	mono := g.mono()
	start := g.seen.IsZero()
	if start {
		g.base, g.slack, g.seen = now, ClockStepBound, mono
		if retention > 0 {
			newest, err := st.NewestReceivedAt(ctx)
			if err != nil {
				g.seen = time.Time{}
				log.Warn("sweep held: could not read the newest delivery's receipt time to check the clock against", logErr, err)
				return false
			}
			// Past retention: this sweep would delete every delivery not owed downstream.
			if slack := max(retention, ClockStepBound); !newest.IsZero() && now.Sub(newest) > slack {
				g.base, g.slack = newest, slack
			}
		}
	}
	ahead := now.Sub(g.base.Add(mono.Sub(g.seen)))
	if ahead <= g.slack {
		if !g.heldAt.IsZero() {
			log.Info("the clock is back within reach of the monotonic clock: the sweeps delete again", "now", now.UTC().Format(time.RFC3339))
			m.SweepClockHeld.Set(0)
		}
		g.base, g.slack, g.seen, g.heldAt = now, ClockStepBound, mono, time.Time{}
		return true
	}
	if g.heldAt.IsZero() {
		g.heldAt = mono
		m.SweepClockHeld.Set(ahead.Seconds())
		what := fmt.Sprintf("the wall clock leapt forward by %s since the last sweep", ahead.Round(time.Second))
		if start {
			what = fmt.Sprintf("the newest delivery stored was received %s before the wall clock's time, more than retention (%s): the clock leapt forward while hookdedup was down, or nothing was received for that long",
				ahead.Round(time.Second), g.slack)
		}
		log.Error(what+"; the sweeps hold their deletes (retention, expired claims, traces), which by this clock could delete deliveries not yet past retention, for good; intake goes on. Set the clock right and they resume at the next sweep; if the clock is right, they resume by themselves after "+g.hold.String(),
			"now", now.UTC().Format(time.RFC3339), "step", ahead.Round(time.Second))
	}
	if mono.Sub(g.heldAt) >= g.hold {
		log.Warn("the wall clock has stood ahead for "+g.hold.String()+": taken for right, and the sweeps delete again by it", "now", now.UTC().Format(time.RFC3339))
		m.SweepClockHeld.Set(0)
		g.base, g.slack, g.seen, g.heldAt = now, ClockStepBound, mono, time.Time{}
		return true
	}
	return false
}
