package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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

// heldSetting holds, while the sweeps hold, when the hold began by the wall clock in
// doubt and the time the monotonic clock gave then, in Unix milliseconds ("began
// expected"); "" when they hold not. Deliveries received during a hold are stamped by
// the clock in doubt: a restart that checked the clock against the newest of them took
// it for right and deleted by it. And a server stopped each night, held at each start,
// never ran the hold out.
const heldSetting = "sweep_clock_held"

// clockGuard holds the sweeps' deletes while the wall clock (the sweeps' Now) stands
// further ahead than the monotonic clock has run since a time it trusted: the last
// sweep's, or at a start the later of the newest delivery's receipt time and the last
// sweep's time stored (sweptAtSetting), from which a clock stepped while the server
// was down is seen; or, when a run before held, the time it trusted then (heldSetting). Deletes resume at the first sweep after
// the clock is set right, or once the step has stood for hold by the monotonic clock.
// Intake never waits for it: it stamps with the clock as it is.
type clockGuard struct {
	hold time.Duration
	mono func() time.Time // time.Now: its monotonic reading, which no step of the wall clock moves

	base   time.Time     // the wall clock's time trusted, at seen
	slack  time.Duration // how far ahead of base, run on by the monotonic clock, the wall clock may be
	seen   time.Time     // monotonic reading at base; zero before the first sweep
	heldAt time.Time     // monotonic reading when the hold began; zero when not holding
	stored bool          // a hold is stored in heldSetting, by this run or an earlier one
}

// deletes reports whether this round of sweeps may delete, at now by the sweeps'
// clock, logging and setting the metric when a hold begins or ends. It returns the
// failure to read the times to check the clock against (the round then holds), or to
// store the sweep's time (mark), for RunSweeps to log with the round's.
func (g *clockGuard) deletes(ctx context.Context, st ClockReference, now time.Time, retention time.Duration, m *Metrics, log *slog.Logger) (bool, error) {
	mono := g.mono()
	start := g.seen.IsZero()
	// began is when a hold stored by an earlier run began, by the clock in doubt; zero
	// when none is under way, or the clock was set back since.
	var began time.Time
	setBack := false // a hold stored, and the clock set back since
	if start {
		g.base, g.slack, g.seen = now, ClockStepBound, mono
		held, err := heldSince(ctx, st)
		if err != nil {
			g.seen = time.Time{}
			return false, fmt.Errorf("sweep held: could not read the times to check the clock against: %w", err)
		}
		g.stored = !held.began.IsZero()
		switch {
		case !held.began.IsZero() && !held.began.After(now):
			// A hold was under way when serve stopped, and the clock has not been set
			// back since: it goes on, against the time trusted when it began.
			began, g.base = held.began, held.expected
		case !held.began.IsZero():
			// Set back since the hold began, maybe only part of the way. Deliveries
			// received since were stamped by the clock in doubt: the clock is checked,
			// as at any start, against the time trusted when the hold began.
			if slack := max(retention, ClockStepBound); retention > 0 && now.Sub(held.expected) > slack {
				g.base, g.slack, setBack = held.expected, slack, true
			}
		case retention > 0:
			trusted, err := trustedAtStart(ctx, st)
			if err != nil {
				g.seen = time.Time{}
				return false, fmt.Errorf("sweep held: could not read the times to check the clock against: %w", err)
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
		g.unhold(ctx, st, log)
		g.base, g.slack, g.seen, g.heldAt = now, ClockStepBound, mono, time.Time{}
		return true, g.mark(ctx, st, now)
	}
	if g.heldAt.IsZero() {
		g.heldAt = mono
		m.SweepClockHeld.Set(ahead.Seconds())
		if !began.IsZero() {
			// Counted from when it began, so that runs each shorter than the hold still
			// see it out.
			g.heldAt = mono.Add(-now.Sub(began))
		} else {
			g.keepHold(ctx, st, now, now.Add(-ahead), log)
		}
		what := fmt.Sprintf("the wall clock leapt forward by %s since the last sweep", ahead.Round(time.Second))
		switch {
		case !began.IsZero():
			what = fmt.Sprintf("the sweeps were holding when hookdedup stopped, since %s by this clock, and the wall clock stands %s ahead of the time trusted then",
				began.UTC().Format(time.RFC3339), ahead.Round(time.Second))
		case setBack:
			what = fmt.Sprintf("the sweeps were holding when hookdedup stopped, and the wall clock, set back since, still stands %s ahead of the time trusted then, more than retention (%s)",
				ahead.Round(time.Second), g.slack)
		case start:
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
		g.unhold(ctx, st, log)
		return true, g.mark(ctx, st, now)
	}
	return false, nil
}

// storedHold is a hold stored in heldSetting: when it began by the clock in doubt, and
// the time trusted then.
type storedHold struct{ began, expected time.Time }

// heldSince reads the hold stored by an earlier run; zero when there is none, or what
// is stored was not written by this code (a hand-edited row, another server's table).
func heldSince(ctx context.Context, st ClockReference) (storedHold, error) {
	v, err := st.Setting(ctx, heldSetting)
	if errors.Is(err, storage.ErrNotFound) {
		return storedHold{}, nil
	}
	if err != nil {
		return storedHold{}, err
	}
	b, e, ok := strings.Cut(v, " ")
	began, err1 := strconv.ParseInt(b, 10, 64)
	expected, err2 := strconv.ParseInt(e, 10, 64)
	// A hold begins ahead of the time it trusts (keepHold), and no hold began before
	// hookdedup was written: anything else, taken for a hold begun long ago and run
	// out, would delete by the clock in doubt at once.
	if !ok || err1 != nil || err2 != nil || expected < earliestHold || began <= expected {
		return storedHold{}, nil
	}
	return storedHold{time.UnixMilli(began), time.UnixMilli(expected)}, nil
}

// earliestHold is 2000-01-01 in Unix milliseconds: no stored hold is older.
const earliestHold = 946684800000

// keepHold stores a hold that began at now by the wall clock, when the monotonic clock
// gave expected, for a restart to go on with (heldSetting). A failure is logged: a
// restart then checks the clock as if there were none.
func (g *clockGuard) keepHold(ctx context.Context, st ClockReference, now, expected time.Time, log *slog.Logger) {
	v := strconv.FormatInt(now.UnixMilli(), 10) + " " + strconv.FormatInt(expected.UnixMilli(), 10)
	err := st.SetSetting(ctx, heldSetting, v)
	if err != nil && ctx.Err() == nil {
		log.Warn("could not store that the sweeps hold, which a restart would go on with", logErr, err)
	}
	g.stored = g.stored || err == nil
}

// unhold clears the hold stored, if there is one, as the sweeps delete again: not a
// write at every round.
func (g *clockGuard) unhold(ctx context.Context, st ClockReference, log *slog.Logger) {
	if !g.stored {
		return
	}
	if err := st.SetSetting(ctx, heldSetting, ""); err != nil {
		if ctx.Err() == nil {
			log.Warn("could not clear the sweeps' hold stored; a restart goes on holding until the clock is back within reach of the time it trusted", logErr, err)
		}
		return
	}
	g.stored = false
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
// clock against. A failure is returned and the sweeps go on: the next round writes it
// again, and a start without it checks against the newest delivery, as before.
func (g *clockGuard) mark(ctx context.Context, st ClockReference, now time.Time) error {
	if err := st.SetSetting(ctx, sweptAtSetting, strconv.FormatInt(now.UnixMilli(), 10)); err != nil {
		return fmt.Errorf("could not store the sweep's time, which the next start checks the clock against: %w", err)
	}
	return nil
}
