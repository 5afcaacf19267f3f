package alert_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestAlerts_NotificationIDNotReusedAfterSweep: a notification's id is its webhook's
// webhook-id (and an email's Message-ID), so that the receiving end can drop a retry it
// already has. Once the retention sweep has been through the resolved alerts, a later
// alert's notifications carry no id already sent for another alert: a receiver that
// drops what it already has would drop the new outage.
func TestAlerts_NotificationIDNotReusedAfterSweep(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	var mu sync.Mutex
	var ready error
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { mu.Lock(); defer mu.Unlock(); return ready }
		})
	setReady := func(err error) { mu.Lock(); ready = err; mu.Unlock() }

	// A first outage: opened, then resolved; both told.
	setReady(errors.New("ping: database is locked"))
	f.evaluate(t, e)
	setReady(nil)
	f.settle(t, e)
	first := h.payloadIDs()
	firstAlert := f.alerts(t)[0].ID
	if len(first) != 2 {
		t.Fatalf("first outage: webhook got %d notifications (%v), want 2", len(first), first)
	}

	// A quiet month: the retention sweep deletes the resolved alert with its notifications.
	f.clock.Add(30 * 24 * time.Hour)
	n, err := f.db.SweepAlerts(context.Background(), f.clock.Now().Add(-7*24*time.Hour), 100)
	if err != nil {
		t.Fatalf("SweepAlerts = %d, %v", n, err)
	}

	// A second outage.
	setReady(errors.New("ping: disk I/O error"))
	f.evaluate(t, e)
	ids := h.payloadIDs()
	if len(ids) != 3 {
		t.Fatalf("webhook got %d notifications (%v), want 3", len(ids), ids)
	}
	if slices.Contains(first, ids[2]) {
		t.Errorf("the second outage's notification has webhook-id %q, already sent for the first outage's (%v): "+
			"a receiver dropping retries it already has drops this new alert", ids[2], first)
	}
	if a := f.alerts(t)[0]; a.ID == firstAlert {
		t.Errorf("the second outage's alert has id %d, the id of the first (deleted) one", a.ID)
	}
}
