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
