package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// POST /api/v1/release of every stuck key (or every key in a state) of a source that is
// neither configured nor holds a stored key, a misspelt name, is refused with the
// configured sources, as the command line's release --stuck refuses it: answered "0
// keys matched", it would read as a source with nothing stuck. A source the
// configuration no longer has but whose keys are stored is still released.
func TestAPI_ReleaseSetOfUnknownSource(t *testing.T) {
	e := newConsoleEnv(t)
	ctx := context.Background()
	storagetest.Record(t, e.db, &storage.Delivery{Source: "old", Key: "evt_1", KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	e.clock.Add(time.Hour) // stuck now
	tok, _, err := e.db.CreateToken(ctx, "operator", "script", "test")
	if err != nil {
		t.Fatal(err)
	}
	code, body := apiPost(t, e.srv.URL+"/api/v1/release", tok, `{"source":"OTA","stuck":true,"reason":"downstream back"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `OTA`) || !strings.Contains(body, "ota, pms") {
		t.Errorf("release of every stuck key of a misspelt source: %d %s; want 400 naming it and the configured sources", code, body)
	}
	code, body = apiPost(t, e.srv.URL+"/api/v1/release", tok, `{"source":"old","stuck":true,"reason":"source removed"}`)
	if code != http.StatusOK || !strings.Contains(body, `"changed": 1`) {
		t.Errorf("release of every stuck key of a source no longer configured: %d %s; want it released", code, body)
	}
}
