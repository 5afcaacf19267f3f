package postgres_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestAlerts_ChannelAddedDuringRollingRestart: an operator adds a channel ("pager") to a
// rule and restarts the replicas one after the other. Replica A, restarted, opens an
// alert told to ops and pager. Replica B, still on the old configuration, leaves pager's
// notification to A rather than giving it up as no longer configured: the pager is told
// once.
func TestAlerts_ChannelAddedDuringRollingRestart(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	dbA, dbB := openEngine(t, url), openEngine(t, url)
	conn := postgrestest.Connect(t, url)

	clk := storagetest.NewClock(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))

	var opsGot, pagerGot atomic.Int32
	receiver := func(n *atomic.Int32) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1) }))
		t.Cleanup(srv.Close)
		return srv
	}
	opsSrv, pagerSrv := receiver(&opsGot), receiver(&pagerGot)
	engine := func(st alert.Store, channels ...*alert.Channel) *alert.Engine {
		var names []string
		for _, c := range channels {
			names = append(names, c.Name())
		}
		rule := alert.Rule{Name: "pms-down", Kind: alert.KindDownstreamFailing, Source: "ota", Times: 1, Channels: names}
		e, err := alert.New(alert.Config{Store: st, Rules: []alert.Rule{rule}, Sources: []string{"ota"}, Now: clk.Now,
			Channels: channels, Ready: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := engine(dbA, webhookChannel(t, "ops", opsSrv.URL), webhookChannel(t, "pager", pagerSrv.URL)) // restarted with the new channel
	b := engine(dbB, webhookChannel(t, "ops", opsSrv.URL))                                           // not yet

	if _, err := conn.Exec(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
		VALUES ('ota', 'k', 1, $1, 5, 502, 'status 502', '')`, clk.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := a.Evaluate(ctx); err != nil { // A opens the alert: ops and pager to tell
		t.Fatal(err)
	}
	// Both replicas go on sending what is due, B first this time, for a minute.
	for range 12 {
		for _, e := range []*alert.Engine{b, a} {
			if _, err := e.SendDue(ctx); err != nil {
				t.Fatal(err)
			}
		}
		clk.Add(5 * time.Second)
	}
	if n := opsGot.Load(); n != 1 {
		t.Errorf("ops told %d times, want 1", n)
	}
	if n := pagerGot.Load(); n != 1 {
		var state, lastErr string
		_ = conn.QueryRow(ctx, `SELECT state, last_error FROM alert_notifications WHERE channel = 'pager'`).Scan(&state, &lastErr)
		t.Errorf("pager told %d times, want 1: its notification is %s (%q), given up by the replica that does not have the channel yet",
			n, state, lastErr)
	}
}
