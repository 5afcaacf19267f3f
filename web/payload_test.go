package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// sweepPayloads runs the retention sweep as if every delivery stored by now were past
// retention; it deletes those no longer owed downstream.
func sweepPayloads(t *testing.T, db *sqlite.DB) {
	t.Helper()
	enginetest.CatchUpRollups(t, db)
	now := db.Now()
	var from storage.SweepCursor
	for range 100 {
		_, next, err := db.SweepDeliveries(context.Background(), now, now.Add(time.Minute), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if next.Done() {
			return
		}
		from = next
	}
	t.Fatal("the retention sweep did not reach its end")
}

// TestAPI_ReprocessPayloadGone: the API refuses to reprocess a key whose payload is no
// longer stored, and says why, for one key and in bulk.
func TestAPI_ReprocessPayloadGone(t *testing.T) {
	e := newAPIEnv(t)
	e.record(t, "k1", `{}`, false) // record only: nothing is owed downstream
	sweepPayloads(t, e.db)

	code, out := e.call(t, storage.RoleOperator, "POST", "/api/v1/release",
		`{"source":"ota","key":"k1","reason":"downstream lost it","reprocess":true}`)
	msg, _ := out["error"].(string)
	if code != 409 || !strings.Contains(msg, "cannot reprocess") || !strings.Contains(msg, "no longer stored") ||
		!strings.Contains(msg, "release the key instead") {
		t.Fatalf("reprocess without a payload: %d %v", code, out)
	}
	code, out = e.call(t, storage.RoleOperator, "POST", "/api/v1/release",
		`{"source":"ota","state":"processed","reason":"downstream lost it","reprocess":true}`)
	results, _ := out["results"].([]any)
	if code != 200 || out["changed"] != float64(0) || len(results) != 1 ||
		!strings.Contains(results[0].(map[string]any)["error"].(string), "no longer stored") {
		t.Fatalf("bulk reprocess without a payload: %d %v", code, out)
	}
	if c, _ := e.db.Claim(context.Background(), "ota", "k1"); c.State != storage.StateProcessed {
		t.Fatalf("refused reprocess moved the key to %s", c.State)
	}
}

// TestConsole_ReprocessPayloadGone: the keys page says why a key was not reprocessed.
func TestConsole_ReprocessPayloadGone(t *testing.T) {
	e := newConsoleEnv(t)
	sweepPayloads(t, e.db) // the record-only ota key's payload goes; the failed pms key's stays
	c := e.as(t, "operator")
	c.get("/keys")
	code, _, _ := c.post("/keys/release", url.Values{"k": {"ota/derived:9f2c", "pms/" + e.failedKey},
		"reason": {"downstream lost it"}, "action": {"reprocess"}, "return": {"/keys"}})
	if code != 303 {
		t.Fatalf("reprocess: %d", code)
	}
	_, body := c.get("/keys")
	parsePage(t, body).testid("flash").shows("Reprocessing 1 key.", "1 cannot be reprocessed: the payload is no longer stored")
	if cl, _ := e.db.Claim(context.Background(), "ota", "derived:9f2c"); cl.State != storage.StateProcessed {
		t.Fatalf("refused reprocess moved the key to %s", cl.State)
	}
}
