package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestAlerts_RuleRenamedDuringRollingRestart: an operator renames a rule
// ("pms-down" → "pms-failing") and restarts the replicas one after the other. For the
// minute during which replica A runs the new configuration and replica B the old one,
// the downstream is failing. Neither resolves the other's alert while the other sees
// it holding (its held_at is recent): one alert per name, and one notification each.
func TestAlerts_RuleRenamedDuringRollingRestart(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	dbA, dbB := openEngine(t, url), openEngine(t, url)
	conn := postgrestest.Connect(t, url)

	clk := storagetest.NewClock(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))

	ops := webhookChannel(t, "ops", "http://127.0.0.1:9/")
	engine := func(st alert.Store, name string) *alert.Engine {
		rule := alert.Rule{Name: name, Kind: alert.KindDownstreamFailing, Source: "ota", Times: 1, ClearFor: 2 * time.Minute,
			Channels: []string{"ops"}}
		e, err := alert.New(alert.Config{Store: st, Rules: []alert.Rule{rule}, Sources: []string{"ota"}, Now: clk.Now,
			Channels: []*alert.Channel{ops}, Ready: func(context.Context) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := engine(dbA, "pms-failing"), engine(dbB, "pms-down") // A restarted with the new name; B not yet

	if _, err := conn.Exec(ctx, `INSERT INTO attempts (source, key, delivery, started_at, duration_ms, status, error, response)
		VALUES ('ota', 'k', 1, $1, 5, 502, 'status 502', '')`, clk.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	// One minute of overlap, each replica evaluating every 5 s at its own moments.
	for range 12 {
		for _, e := range []*alert.Engine{b, a} {
			if err := e.Evaluate(ctx); err != nil {
				t.Fatal(err)
			}
			clk.Add(2500 * time.Millisecond)
		}
	}
	var alerts, notes int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM alerts`).Scan(&alerts); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM alert_notifications`).Scan(&notes); err != nil {
		t.Fatal(err)
	}
	// At most: one alert per name, each with its opened notification.
	if alerts > 2 || notes > 2 {
		t.Errorf("one minute of two replicas on two configurations, the downstream failing all along: %d alerts opened and %d notifications queued; "+
			"want at most one alert per rule name and its opened notification", alerts, notes)
	}
}
