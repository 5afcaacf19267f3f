package alert_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestAlerts_StopMidSendHandsTheLeaseBack: serve stops (systemctl restart, an upgrade)
// while a notification is being sent to a slow receiver. The attempt is cut short and
// the notification's lease handed back: serve started again at once sends it, rather
// than waiting for the stopped process's five-minute lease to run out.
func TestAlerts_StopMidSendHandsTheLeaseBack(t *testing.T) {
	f := newFixture(t)
	slowSrv, slowGot := hangingHook(t)
	rules := func() []alert.Rule {
		return []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}}
	}
	ready := func(context.Context) error { return errors.New("ping: database is locked") }
	before := f.engine(t, rules(), []*alert.Channel{hangingChannel(t, "ops", slowSrv.URL, 30*time.Second)},
		func(c *alert.Config) { c.Ready, c.Interval = ready, 50*time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); before.Run(ctx) }()
	if _, ok := waitFor(10*time.Second, func() bool { return slowGot.Load() > 0 }); !ok {
		cancel()
		<-done
		t.Fatal("the notification was never sent")
	}
	cancel() // serve stops mid-send
	<-done

	// serve starts again ten seconds later; the receiver answers now.
	f.clock.Add(10 * time.Second)
	h := newHook(t, 0)
	after := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) { c.Ready = ready })
	for range 6 { // a minute of evaluations
		f.evaluate(t, after)
		f.clock.Add(10 * time.Second)
	}
	if len(h.payloads()) != 1 {
		a := f.alerts(t)[0]
		t.Errorf("a minute after the restart the channel got %d notifications, want the alert's opening (alert: %d pending, %d sent, last error %q)",
			len(h.payloads()), a.PendingNotifications, a.SentNotifications, a.LastNotificationError)
		f.clock.Add(5 * time.Minute) // the dead process's lease runs out
		f.evaluate(t, after)
		t.Logf("once the stopped process's 5-minute lease ran out: %d notifications", len(h.payloads()))
	}
}
