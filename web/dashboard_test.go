package web_test

import (
	"context"
	"net/http"
	"testing"
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
