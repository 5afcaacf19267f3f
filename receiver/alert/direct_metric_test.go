package alert_test

import (
	"context"
	"testing"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestEngine_DirectSendCountsEachAttempt: an alert told straight away (the database
// takes no write) is tried up to three times; each refused try that is tried again is
// counted as a retry, as the outbox's are, so that hookdedup_alert_notifications_total
// shows a channel failing whichever way the notification went.
func TestEngine_DirectSendCountsEachAttempt(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 2) // refuses the first two requests
	var told notified
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Ready = nil // the real Ping
			c.Notified = told.add
		})
	if err := renameAside(f.db.Path()); err != nil {
		t.Fatal(err)
	}
	if err := e.Evaluate(context.Background()); err == nil {
		t.Fatal("Evaluate stored an alert in a database whose file is gone")
	}
	e.WaitDirect()
	wantEvents(t, h, "alert.opened db")
	if got := told.String(); got != "ops retry, ops retry, ops sent" {
		t.Errorf("results told (the metric's): %s; want ops retry, ops retry, ops sent", got)
	}
}
