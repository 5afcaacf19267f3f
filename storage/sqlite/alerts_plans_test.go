package sqlite_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDB_AlertsPlans: the tabs of active alerts and the engine's look-up of them read
// the partial index of active alerts, not every alert by id; the sweep finds resolved
// ones through theirs.
func TestDB_AlertsPlans(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	for _, state := range []string{"", "active", storage.AlertOpen, storage.AlertAcknowledged} {
		plan, err := db.ExplainAlerts(ctx, storage.AlertFilter{State: state, Before: 100})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "SCAN a USING INDEX alerts_active") || strings.Contains(plan, "PRIMARY KEY") {
			t.Errorf("alerts %q plan:\n%s", state, plan)
		}
	}
	plan, err := db.ExplainActiveAlerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "SCAN a USING INDEX alerts_active") {
		t.Errorf("active alerts plan:\n%s", plan)
	}
	plan, err = db.ExplainSweepAlerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "INDEX alerts_resolved (resolved_at<?)") || strings.Contains(plan, "SCAN alerts") {
		t.Errorf("alerts sweep plan:\n%s", plan)
	}
}
