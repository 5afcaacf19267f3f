package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/web"
)

// TestConsole_DashboardReadsOnly: the dashboard shows the deliveries received since the
// background roll-up last ran, and showing it writes nothing: the roll-up still has
// them to fold.
func TestConsole_DashboardReadsOnly(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	code, body := c.get("/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	parsePage(t, body).testid("card-money").shows("190.00")
	n, err := e.db.RollupStats(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("the dashboard rolled the deliveries up itself")
	}
}

// TestConsole_DashboardClockWarning: the dashboard warns when the last hour's signed
// deliveries say this machine's clock is more than a minute off the senders', in the
// right direction, and says nothing under a minute or without deliveries to tell.
func TestConsole_DashboardClockWarning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		median time.Duration
		n      int
		want   []string // nil: no warning
	}{
		{"SendersAhead", 2*time.Minute + 5*time.Second, 12, []string{"seems 2 min 5 s behind the senders'", "12 signed deliveries", "timedatectl"}},
		{"SendersBehind", -time.Hour - 3*time.Minute, 4, []string{"seems 1 h 3 min ahead of the senders'", "timedatectl"}},
		{"UnderAMinute", 59 * time.Second, 100, nil},
		{"AMinuteBehind", -time.Minute, 100, nil},
		{"NoDeliveries", 0, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newConsoleEnv(t, func(c *web.Config) {
				c.ClockSkew = func() (time.Duration, int) { return tc.median, tc.n }
			})
			code, p := e.as(t, "viewer").page("/")
			if code != http.StatusOK {
				t.Fatalf("GET / = %d", code)
			}
			warning := p.testid("clock-warning")
			if tc.want == nil {
				if warning.len() != 0 {
					t.Fatalf("a warning: %q", warning.text())
				}
				return
			}
			warning.shows(tc.want...)
		})
	}
}
