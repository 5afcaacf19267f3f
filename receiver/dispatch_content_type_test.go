package receiver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_ContentTypeAsSent: an event is handed downstream with the Content-Type
// its delivery was sent with, byte for byte; one sent without a Content-Type, which
// intake took as JSON, goes as application/json, so that a downstream that parses by
// type reads it.
func TestDispatch_ContentTypeAsSent(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	v, err := signature.New(signature.Config{Scheme: "none"})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "ota", Verifier: v, TTL: time.Hour, Keys: receiver.KeySpec{EventID: []string{"/id"}},
		ForwardURL: ds.srv.URL, MaxAttempts: 3, AttemptTimeout: time.Second, MaxBackoff: time.Second}
	db := storagetest.Open(t)
	d := startDispatcher(t, db, src)
	srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, OnAccepted: d.Wake}), nil)

	for id, ct := range map[string]string{"typed": "application/vnd.ota+json; Charset=UTF-8", "untyped": ""} {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/ota", strings.NewReader(`{"id":"`+id+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d, want 200", id, resp.StatusCode)
		}
		waitState(t, db, id, storage.StateProcessed)
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var got []string
	for _, h := range ds.headers {
		got = append(got, h.Get("Idempotency-Key")+" "+h.Get("Content-Type"))
	}
	slices.Sort(got)
	if want := []string{"ota:typed application/vnd.ota+json; Charset=UTF-8", "ota:untyped application/json"}; !slices.Equal(got, want) {
		t.Fatalf("hand-offs %q, want %q", got, want)
	}
}
