package alert_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestAlerts_ResolvedNotToldBeforeOpened: a channel refuses the alert's "opened" once (a
// blip: a 500, a restart of the chat server), and the notification waits for its retry.
// Meanwhile the alert resolves. The "resolved" waits for the "opened": the channel
// hears of them in their order, and does not end with the alert open.
func TestAlerts_ResolvedNotToldBeforeOpened(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 1) // refuses the first request
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
		})
	f.evaluate(t, e) // opened; its notification refused, retried in about 1 s
	a := f.alerts(t)[0]
	if _, err := f.db.ResolveAlert(context.Background(), a.ID, "rita", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		f.clock.Add(500 * time.Millisecond)
		if _, err := e.SendDue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	wantEvents(t, h, "alert.opened db", "alert.resolved db")
}
