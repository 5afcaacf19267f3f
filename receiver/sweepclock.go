package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/hookdedup/hookdedup/storage"
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

// ClockReference is what the guard of the sweeps needs of storage: at a start, the
// times it checks the clock against (the newest delivery's receipt, the last sweep's
// time), and after each sweep that deletes, a place to leave that sweep's time.
type ClockReference interface {
	NewestReceivedAt(ctx context.Context) (time.Time, error)
	Setting(ctx context.Context, name string) (string, error)
	SetSetting(ctx context.Context, name, value string) error
}

// sweptAtSetting is the setting that holds the wall clock's time, in Unix
// milliseconds, of the last round of sweeps that deleted. A server that is stopped
// each night, on a property quiet for longer than retention, starts each morning with
// its newest delivery past retention: checked against that delivery alone, the
// clock looked stepped at every start, and the sweeps, held until a day had passed,
// never ran again.
const sweptAtSetting = "sweep_clock"

// clockGuard holds the sweeps' deletes while the wall clock (the sweeps' Now) stands
// further ahead than the monotonic clock has run since a time it trusted: the last
// sweep's, or at a start the later of the newest delivery's receipt time and the last
// sweep's time stored (sweptAtSetting), from which a clock stepped while the server
// was down is seen. Deletes resume at the first sweep after
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
func (g *clockGuard) deletes(ctx context.Context, st ClockReference, now time.Time, retention time.Duration, m *Metrics, log *slog.Logger) bool {
	mono := g.mono()
	start := g.seen.IsZero()
	if start {
		g.base, g.slack, g.seen = now, ClockStepBound, mono
		if retention > 0 {
			trusted, err := trustedAtStart(ctx, st)
			if err != nil {
				g.seen = time.Time{}
				log.Warn("sweep held: could not read the times to check the clock against", logErr, err)
				return false
			}
			// Past retention: this sweep would delete every delivery not owed downstream.
			if slack := max(retention, ClockStepBound); !trusted.IsZero() && now.Sub(trusted) > slack {
				g.base, g.slack = trusted, slack
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
		g.mark(ctx, st, now, log)
		return true
	}
	if g.heldAt.IsZero() {
		g.heldAt = mono
		m.SweepClockHeld.Set(ahead.Seconds())
		what := fmt.Sprintf("the wall clock leapt forward by %s since the last sweep", ahead.Round(time.Second))
		if start {
			what = fmt.Sprintf("the newest delivery stored was received, and the last sweep ran, %s before the wall clock's time, more than retention (%s): the clock leapt forward while hookdedup was down, or it was down for that long",
				ahead.Round(time.Second), g.slack)
		}
		log.Error(what+"; the sweeps hold their deletes (retention, expired claims, traces), which by this clock could delete deliveries not yet past retention, for good; intake goes on. Set the clock right and they resume at the next sweep; if the clock is right, they resume by themselves after "+g.hold.String(),
			"now", now.UTC().Format(time.RFC3339), "step", ahead.Round(time.Second))
	}
	if mono.Sub(g.heldAt) >= g.hold {
		log.Warn("the wall clock has stood ahead for "+g.hold.String()+": taken for right, and the sweeps delete again by it", "now", now.UTC().Format(time.RFC3339))
		m.SweepClockHeld.Set(0)
		g.base, g.slack, g.seen, g.heldAt = now, ClockStepBound, mono, time.Time{}
		g.mark(ctx, st, now, log)
		return true
	}
	return false
}

// trustedAtStart is the later of the newest delivery's receipt time and the last
// deleting sweep's time stored; zero when there is neither.
func trustedAtStart(ctx context.Context, st ClockReference) (time.Time, error) {
	newest, err := st.NewestReceivedAt(ctx)
	if err != nil {
		return time.Time{}, err
	}
	v, err := st.Setting(ctx, sweptAtSetting)
	if errors.Is(err, storage.ErrNotFound) {
		return newest, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		// Not written by this code: the newest delivery alone is the reference, as
		// before any sweep left a time.
		return newest, nil
	}
	if swept := time.UnixMilli(ms); swept.After(newest) {
		return swept, nil
	}
	return newest, nil
}

// mark leaves now as the last deleting sweep's time, for the next start to check the
// clock against. A failure is logged and the sweeps go on: the next round writes it
// again, and a start without it checks against the newest delivery, as before.
func (g *clockGuard) mark(ctx context.Context, st ClockReference, now time.Time, log *slog.Logger) {
	if err := st.SetSetting(ctx, sweptAtSetting, strconv.FormatInt(now.UnixMilli(), 10)); err != nil && ctx.Err() == nil {
		log.Warn("could not store the sweep's time, which the next start checks the clock against", logErr, err)
	}
}
