package receiver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestBatch_WholeBody: a sender whose body is itself the array of events (an e-mail or
// analytics provider's `[{…},{…}]`) is taken with batch = "#", the whole document:
// each element is an item, keyed, stored and handed downstream with its own bytes and
// no envelope, since the request says nothing besides its events. A redelivery is
// duplicates; a body that is no array is refused naming the batch.
func TestBatch_WholeBody(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "none"})
	if err != nil {
		t.Fatal(err)
	}
	ds := newDownstream(t, 0, nil)
	src := receiver.Source{Name: "mail", Verifier: v, TTL: time.Hour, Keys: receiver.KeySpec{EventID: []string{"/sg_event_id"}},
		Batch: receiver.WholeBody, ForwardURL: ds.srv.URL, MaxAttempts: 3, AttemptTimeout: time.Second, MaxBackoff: time.Second}
	e := newEnv(t, sqlite.Options{}, src)
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: e.db, Sources: []receiver.Source{src},
		FirstBackoff: 40 * time.Millisecond, Poll: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	items := []string{`{"sg_event_id":"e1","event":"bounce"}`, `{ "sg_event_id" : "e2", "event" : "open" }`}
	body := " [\n  " + strings.Join(items, ",\n  ") + "\n]\n"
	code, a := postBatch(t, e.srv.URL, "/webhooks/mail", body)
	if code != http.StatusOK || outcomes(a) != "accepted,accepted" {
		t.Fatalf("first: %d %+v", code, a)
	}
	if code, a := postBatch(t, e.srv.URL, "/webhooks/mail", body); code != http.StatusOK || outcomes(a) != "duplicate,duplicate" {
		t.Errorf("redelivered: %d %+v", code, a)
	}
	got := handOffs(t, ds, 2)
	ds.mu.Lock()
	bodies := map[string]bool{}
	for _, b := range ds.bodies {
		bodies[b] = true
	}
	ds.mu.Unlock()
	for i, it := range items {
		if !bodies[it] {
			t.Errorf("item %d was not handed on with its own bytes %q: %v", i, it, bodies)
		}
	}
	for k, h := range got {
		if env := h.Values("X-Hookdedup-Batch-Envelope"); env != nil {
			t.Errorf("%s handed on with envelope %q, want none", k, env)
		}
		if h.Get("X-Hookdedup-Batch") != a.Batch {
			t.Errorf("%s handed on with batch %q, want %s", k, h.Get("X-Hookdedup-Batch"), a.Batch)
		}
	}

	code, a = postBatch(t, e.srv.URL, "/webhooks/mail", `{"sg_event_id":"e3"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(a.Error, `"#" is a JSON object, not an array`) {
		t.Errorf("an object to a whole-body batch: %d %+v", code, a)
	}
}

// TestCheckBatch_WholeBody: "#" is the whole body; "" leaves a source unbatched and is
// refused as a batch, saying how to name the whole body; "#/events", a fragment
// pointer inside it, is refused, saying how to write it.
func TestCheckBatch_WholeBody(t *testing.T) {
	spec := receiver.KeySpec{EventID: []string{"/id"}}
	if err := receiver.CheckBatch("#", "", spec); err != nil {
		t.Errorf(`"#": %v`, err)
	}
	for batch, want := range map[string]string{
		"":         `"#" for a body that is itself the array`,
		"#/events": `written without the "#": "/events"`,
		"events":   `is not a JSON pointer`,
	} {
		err := receiver.CheckBatch(batch, "", spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want it to say %s", batch, err, want)
		}
	}
	if _, env, err := receiver.SplitBatch([]byte(`[{"id":1}]`), "#", "", 0); err != nil || env != "" {
		t.Errorf("split of a whole-body batch: envelope %q, %v; want none", env, err)
	}
	if _, _, err := receiver.SplitBatch([]byte(`[]`), "#", "", 0); !errors.Is(err, receiver.ErrBadBatch) {
		t.Errorf("an empty whole-body batch: %v, want ErrBadBatch", err)
	}
}
