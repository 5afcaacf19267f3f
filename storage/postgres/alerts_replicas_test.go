package postgres_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// webhookChannel is a webhook alert channel named name that posts to url.
func webhookChannel(t *testing.T, name, url string) *alert.Channel {
	t.Helper()
	c, err := alert.NewChannel(alert.ChannelConfig{Name: name, Type: alert.TypeWebhook, URL: url,
		Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAlerts_FlappingAcrossReplicasKeepsOneAlert: two replicas evaluate the rules of one
// database, each every 5 s at its own moments. A downstream that flaps (fails, then
// succeeds, then fails …) is seen failing by replica B's evaluations and succeeding by
// replica A's. It must keep one alert open, as on one replica, and sends nothing more:
// A must not resolve it on its own view while B sees it hold (and B then open a new one,
// a resolved and an opened notification every clear_for). Once the downstream stays up,
// the alert resolves once.
func TestAlerts_FlappingAcrossReplicasKeepsOneAlert(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	dbA, dbB := openEngine(t, url), openEngine(t, url)
	conn := postgrestest.Connect(t, url)

	clk := storagetest.NewClock(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))

	// A channel that is never sent to here (SendDue is not called): its notifications
	// stay queued, to be counted.
	ops := webhookChannel(t, "ops", "http://127.0.0.1:9/")
	rule := alert.Rule{Name: "pms-down", Kind: alert.KindDownstreamFailing, Source: "ota", Times: 1, ClearFor: 2 * time.Minute,
		Channels: []string{"ops"}}
	engine := func(st alert.Store) *alert.Engine {
		e, err := alert.New(alert.Config{Store: st, Rules: []alert.Rule{rule}, Sources: []string{"ota"}, Now: clk.Now,
			Channels: []*alert.Channel{ops}, Ready: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := engine(dbA), engine(dbB)

	attempt := func(failed bool) {
		e := ""
		if failed {
			e = "status 502"
		}
		if _, err := conn.Exec(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
			VALUES ('ota', 'k', 1, $1, 5, 502, $2, '')`, clk.Now().UnixMilli(), e); err != nil {
			t.Fatal(err)
		}
	}
	// Ten minutes of a downstream that fails and recovers every couple of seconds:
	// B's evaluations fall on failures, A's on successes.
	for i := 0; i < 120; i++ {
		attempt(true)
		if err := b.Evaluate(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Add(2500 * time.Millisecond)
		attempt(false)
		if err := a.Evaluate(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Add(2500 * time.Millisecond)
	}
	counts := func() (opened, resolved, notes int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'resolved') FROM alerts WHERE rule = 'pms-down'`).
			Scan(&opened, &resolved); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM alert_notifications`).Scan(&notes); err != nil {
			t.Fatal(err)
		}
		return opened, resolved, notes
	}
	if opened, resolved, notes := counts(); opened != 1 || resolved != 0 || notes != 1 {
		t.Errorf("a condition seen holding every 5 s by one replica and clear by the other: %d alerts opened, %d resolved, %d notifications in 10 minutes; want 1 open alert and its opened notification (the flap continues it)",
			opened, resolved, notes)
	}

	// The downstream stays up: both replicas see it clear, and one resolves the alert
	// once clear_for has passed since B last saw it hold.
	for range 36 {
		attempt(false)
		for _, e := range []*alert.Engine{a, b} {
			if err := e.Evaluate(ctx); err != nil {
				t.Fatal(err)
			}
			clk.Add(2500 * time.Millisecond)
		}
	}
	if opened, resolved, notes := counts(); opened != 1 || resolved != 1 || notes != 2 {
		t.Errorf("3 minutes clear on both replicas: %d alerts opened, %d resolved, %d notifications; want the one alert resolved, with an opened and a resolved notification",
			opened, resolved, notes)
	}
}
