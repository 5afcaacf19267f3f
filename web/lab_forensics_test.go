package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/web"
)

// The key lab says what a payload would be flagged as, from a read-only lookup, and
// writes nothing.
func TestLab_Foresees(t *testing.T) {
	ctx := context.Background()
	e := newConsoleEnv(t, func(cfg *web.Config) {
		db := cfg.Store.(*sqlite.DB)
		cfg.Foresee = func(ctx context.Context, source string, h http.Header, body []byte) ([]storage.Suspect, error) {
			return db.WouldFlag(ctx, storage.Probe{Source: source, Key: "derived:abc", BusinessKey: "B",
				BusinessWindow: time.Hour, Now: db.Now()})
		}
	})
	c := e.as(t, "viewer")
	lab := func() nodes {
		t.Helper()
		c.get("/lab")
		code, body, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {`{"booking_id":"BK-1"}`}})
		if code != http.StatusOK {
			t.Fatalf("POST /lab = %d", code)
		}
		return parsePage(t, body).testid("lab-result")
	}
	lab().testid("lab-flags-none").shows("flagged as nothing")

	first := &storage.Delivery{Source: "ota", Key: "evt_1", KeyMethod: "event_id", PayloadHash: "x", BusinessKey: "B", Body: []byte(`{}`)}
	if err := e.db.Record(ctx, first, storage.ClaimOptions{TTL: time.Hour, BusinessWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	flag := lab().testid("lab-flags").testid("lab-flag")
	flag.shows("suspected duplicate", fmt.Sprintf("Delivery %d of ota", first.ID))
	if f, err := e.db.FlagsOf(ctx, first.ID); err != nil || len(f.Suspects) != 0 {
		t.Errorf("the lab wrote suspects: %+v, %v", f, err)
	}
}
