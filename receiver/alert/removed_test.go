package alert_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestAlerts_RemovedConfigSettlesEveryNotification: an alert opened while its channel
// kept refusing (its "opened" waits for a retry). The operator then removes the rule and
// the channel from the configuration and restarts serve. With neither rules nor
// channels, Run makes one pass: it resolves the alert, gives up the "opened" (its
// channel is gone), and then the "resolved" queued behind it, so that nothing stays
// pending for a channel that no longer exists.
func TestAlerts_RemovedConfigSettlesEveryNotification(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 1000) // refuses everything
	before := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
		})
	f.evaluate(t, before) // opened; its notification refused, retried later
	if a := f.alerts(t); len(a) != 1 || a[0].PendingNotifications != 1 {
		t.Fatalf("alerts %+v, want one with its opened pending", a)
	}

	f.clock.Add(10 * time.Minute)
	after := f.engine(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	after.Run(ctx) // one pass: no rules, no channels

	a := f.alerts(t)[0]
	if a.Active() {
		t.Fatalf("alert still active after the pass")
	}
	if a.PendingNotifications != 0 {
		t.Errorf("after serve's pass with the rule and its channel removed: %d notifications still pending (failed %d, last error %q); want none: the channel is gone",
			a.PendingNotifications, a.FailedNotifications, a.LastNotificationError)
	}
}

// TestAlerts_RemovedChannelGivenUpAfterGrace: a channel ("pager") is removed from the
// configuration while one of its notifications waits for a retry; the rule keeps another
// channel. The engine leaves pager's notification to a replica that may still have the
// channel, then, once it has been due for ten minutes with no one taking it, gives it up
// as no longer configured: nothing of a removed channel stays pending for good.
func TestAlerts_RemovedChannelGivenUpAfterGrace(t *testing.T) {
	f := newFixture(t)
	pager := newHook(t, 1000) // refuses everything
	ops := newHook(t, 0)
	down := func(c *alert.Config) {
		c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
	}
	before := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"pager"}}},
		[]*alert.Channel{pager.channel(t, "pager")}, down)
	f.evaluate(t, before) // opened; pager refuses, retried later

	after := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{ops.channel(t, "ops")}, down)
	pending := func() int {
		t.Helper()
		as := f.alerts(t)
		return as[len(as)-1].PendingNotifications
	}
	f.clock.Add(time.Minute)
	if _, err := after.SendDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 1 {
		t.Fatalf("a minute on: %d of pager's notifications pending, want it left to a replica that has pager", n)
	}
	f.clock.Add(11 * time.Minute)
	if _, err := after.SendDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := pending(); n != 0 {
		t.Errorf("due for more than ten minutes with no one taking it: %d pending, want it given up", n)
	}
}
