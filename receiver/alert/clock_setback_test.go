package alert_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestEngine_ResolvesAfterClockSetBack: the machine's clock is set back by an hour
// (a step of NTP, a virtual machine resumed) while an alert's condition holds, and the
// condition then clears. The alert resolves once the condition has stayed clear for
// clear_for, not an hour later, when the clock has caught up with the time its last
// hold was recorded at; and it resolves once.
func TestEngine_ResolvesAfterClockSetBack(t *testing.T) {
	for _, name := range []string{"held before the step", "clear before the step"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			h := newHook(t, 0)
			var mu sync.Mutex
			ready := errors.New("database is locked")
			e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
				[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
					c.Ready = func(context.Context) error { mu.Lock(); defer mu.Unlock(); return ready }
				})
			f.evaluate(t, e)
			f.clock.Add(time.Minute)
			f.evaluate(t, e) // held a minute later
			if name == "clear before the step" {
				mu.Lock()
				ready = nil
				mu.Unlock()
				f.clock.Add(30 * time.Second)
				f.evaluate(t, e) // seen clear
			}
			f.clock.Add(-time.Hour)
			mu.Lock()
			ready = nil
			mu.Unlock()
			f.settle(t, e)
			f.clock.Add(alert.DefaultClearFor)
			f.evaluate(t, e)
			wantEvents(t, h, "alert.opened db", "alert.resolved db")
		})
	}
}

// TestEngine_OpensAfterClockSetBack: a rule with for sees its condition hold, and the
// clock is then set back by an hour. The alert opens once the condition has held for
// for since, not an hour later.
func TestEngine_OpensAfterClockSetBack(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, For: 2 * time.Minute, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("database is locked") }
		})
	f.evaluate(t, e)
	f.clock.Add(-time.Hour)
	for range 3 {
		f.evaluate(t, e)
		f.clock.Add(time.Minute)
	}
	wantEvents(t, h, "alert.opened db")
}
