package web_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/web"
)

// TestLab_KeysEachItemOnce: the key lab derives the key of each item of a pasted batch
// once, whether intake would take the request or refuse it whole for an item it cannot
// key, and says which item that is.
func TestLab_KeysEachItemOnce(t *testing.T) {
	var derived atomic.Int64
	e := newConsoleEnv(t, func(cfg *web.Config) {
		cfg.Sources[0].Batch = "/items"
		cfg.Events = func(source string, h http.Header, body []byte) ([][]byte, error) {
			var items [][]byte
			for item := range strings.SplitSeq(string(body), ",") {
				items = append(items, []byte(item))
			}
			return items, nil
		}
		cfg.Derive = func(source string, h http.Header, body []byte) (storage.Derivation, error) {
			derived.Add(1)
			if string(body) == "bad" {
				return storage.Derivation{}, errors.New("event id absent")
			}
			return storage.Derivation{Key: "k:" + string(body), Method: "event_id", Hash: "h"}, nil
		}
	})
	c := e.as(t, "viewer")
	for _, tc := range []struct {
		payload string
		refused string
	}{
		{"a,b,c", ""},
		{"a,bad,c", "item 1: event id absent"},
	} {
		derived.Store(0)
		c.get("/lab")
		code, body, _ := c.post("/lab", url.Values{"source": {"ota"}, "payload": {tc.payload}})
		if code != http.StatusOK {
			t.Fatalf("POST /lab %s = %d", tc.payload, code)
		}
		if n := derived.Load(); n != 3 {
			t.Errorf("the lab derived %d keys for the 3 items of %q, want 3", n, tc.payload)
		}
		page := parsePage(t, body)
		if tc.refused != "" {
			page.testid("lab-refused").shows(tc.refused)
		}
	}
}
