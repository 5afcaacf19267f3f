package alert_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestAlerts_ReplicaWithoutChannelsLeavesOthersNotifications: during a rolling restart
// that adds the first [[alert_channel]], a replica still on the old configuration has
// its rules but no channel. It leaves the new channel's notifications to the replicas
// that have it, as a replica with other channels does, instead of giving them up at once
// as no longer configured: the new replica's outage reaches its channel.
func TestAlerts_ReplicaWithoutChannelsLeavesOthersNotifications(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	down := func(c *alert.Config) {
		c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
	}
	updated := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, down)
	old := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady}}, nil, down)

	if err := updated.Evaluate(context.Background()); err != nil {
		t.Fatal(err)
	}
	updated.WaitDirect()
	// The old replica's sender runs first.
	if _, err := old.SendDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent, err := updated.SendDue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sent != 1 || len(h.payloads()) != 1 {
		a := f.alerts(t)
		t.Fatalf("the replica with the channel sent %d notifications (receiver got %d); alerts %+v: want the opening sent, "+
			"not given up by the replica without channels", sent, len(h.payloads()), a)
	}
	h.check(t)
}
