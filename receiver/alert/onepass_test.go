package alert_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage"
)

// TestAlerts_OnePassResolvesRemovedRuleHeldJustBefore: the operator removes every
// [[alert]] rule and channel and restarts serve a few seconds after the last evaluation
// found the alert's condition holding (the usual restart). With neither rules nor
// channels, Run makes its one pass and returns: that pass resolves the alert, as no
// later one would.
func TestAlerts_OnePassResolvesRemovedRuleHeldJustBefore(t *testing.T) {
	f := newFixture(t)
	h := newHook(t, 0)
	down := func(c *alert.Config) { c.Ready = func(context.Context) error { return errors.New("down") } }
	before := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}},
		[]*alert.Channel{h.channel(t, "ops")}, down)
	f.evaluate(t, before) // opened, held now
	wantEvents(t, h, "alert.opened db")

	// Restarted 10 s later with alerting removed from the configuration.
	f.clock.Add(10 * time.Second)
	none := f.engine(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	none.Run(ctx) // its one pass; it returns

	// serve goes on running for hours: nothing evaluates again.
	f.clock.Add(24 * time.Hour)
	as := f.alerts(t)
	if len(as) != 1 {
		t.Fatalf("alerts = %+v", as)
	}
	if as[0].Active() {
		t.Errorf("alert of a removed rule still %s a day after serve's only pass with no alerting configured (held %v before the restart); want resolved (ResolvedRuleRemoved): no pass will ever come again",
			as[0].State, 10*time.Second)
	}
	if as[0].State == storage.AlertResolved && as[0].ResolvedBy != storage.ResolvedRuleRemoved {
		t.Errorf("resolved by %q, want %q", as[0].ResolvedBy, storage.ResolvedRuleRemoved)
	}
}
