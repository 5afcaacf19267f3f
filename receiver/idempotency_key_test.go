package receiver_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// waitHandOffs waits until ds has answered n hand-offs 2xx and returns their
// headers as a Go server read them.
func waitHandOffs(t *testing.T, ds *downstream, n int) []http.Header {
	t.Helper()
	storagetest.Eventually(t, 10*time.Second, func() error {
		ds.mu.Lock()
		defer ds.mu.Unlock()
		if len(ds.headers) < n {
			return fmt.Errorf("the downstream got %d hand-offs, want %d", len(ds.headers), n)
		}
		return nil
	})
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if len(ds.headers) != n {
		t.Fatalf("the downstream got %d hand-offs, want %d", len(ds.headers), n)
	}
	return append([]http.Header(nil), ds.headers...)
}

// TestDispatch_IdempotencyKeyDistinctEventIDs: event ids that HTTP would read as one
// ("abc", "abc ", " abc") or that servers may read differently (UTF-8) reach the
// downstream under distinct Idempotency-Keys, as received; a plain id keeps its
// "<source>:<key>" form.
func TestDispatch_IdempotencyKeyDistinctEventIDs(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	src := forwardSource(t, ds.srv.URL, 3)
	src.Keys = receiver.KeySpec{EventID: []string{"/id"}}
	e := newEnv(t, sqlite.Options{}, src)
	startDispatcher(t, e.db, src)

	want := map[string]string{ // event id -> Idempotency-Key as received
		"abc":         "ota:abc",
		"abc ":        "!ota:abc%20",
		" abc":        "!ota:%20abc",
		"a b":         "ota:a b",
		"café":        "!ota:caf%C3%A9",
		"abc%20":      "ota:abc%20",
		"!ota:abc%20": "ota:!ota:abc%20", // spells out the encoded form of "abc "
	}
	n := 0
	for id := range want {
		n++
		code, a, _ := e.post(t, "ota", fmt.Sprintf("msg_%d", n), fmt.Sprintf(`{"id":%q}`, id), nil)
		if code != 200 || a.Key != id {
			t.Fatalf("id %q: %d %+v, want it accepted under its own key", id, code, a)
		}
	}
	wantKeys := map[string]string{}
	for id, k := range want {
		wantKeys[k] = fmt.Sprintf("id %q", id)
	}
	expectDistinctKeys(t, ds, wantKeys)
}

// TestDispatch_IdempotencyKeyForms: a stored key the intake would refuse today (a tab,
// which an older version or another writer may have left) and a source name holding ':'
// still give each (source, key) an Idempotency-Key of its own.
func TestDispatch_IdempotencyKeyForms(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	var sources []receiver.Source
	for _, name := range []string{"ota", "a", "a:b"} {
		src := forwardSource(t, ds.srv.URL, 3)
		src.Name = name
		sources = append(sources, src)
	}
	db := storagetest.Open(t)
	startDispatcher(t, db, sources...)

	cases := []struct{ source, key, want string }{
		{"ota", "evt_1", "ota:evt_1"},
		{"ota", "derived:" + "0123456789abcdef", "ota:derived:0123456789abcdef"},
		{"ota", "\tevt_1", "!ota:%09evt_1"},
		{"ota", "evt_1\t", "!ota:evt_1%09"},
		{"ota", "evt:1%", "ota:evt:1%"},
		{"ota", "evt:1% ", "!ota:evt%3A1%25%20"},
		// Plain, "a:b:c" twice: a source name with ':' is always encoded.
		{"a", "b:c", "a:b:c"},
		{"a:b", "c", "!a:b:c"},
		{"a:b", "c:d", "!a:b:c%3Ad"},
		{"a", "b:c:d", "a:b:c:d"},
	}
	for _, c := range cases {
		storagetest.Record(t, db, &storage.Delivery{Source: c.source, Key: c.key, KeyMethod: "event_id", PayloadHash: "h",
			ContentType: "application/json", Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	}
	wantKeys := map[string]string{}
	for _, c := range cases {
		wantKeys[c.want] = fmt.Sprintf("%s/%q", c.source, c.key)
	}
	expectDistinctKeys(t, ds, wantKeys)
}

// expectDistinctKeys waits for one hand-off for each of want (Idempotency-Key as
// received -> what sent it) and checks that no two arrived under one key and that each
// wanted key arrived.
func expectDistinctKeys(t *testing.T, ds *downstream, want map[string]string) {
	t.Helper()
	got := map[string]bool{}
	for _, h := range waitHandOffs(t, ds, len(want)) {
		k := h.Get("Idempotency-Key")
		if got[k] {
			t.Errorf("two events reached the downstream as Idempotency-Key %q", k)
		}
		got[k] = true
	}
	for k, what := range want {
		if !got[k] {
			t.Errorf("%s: no hand-off under Idempotency-Key %q; received %q", what, k, keysOf(got))
		}
	}
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
