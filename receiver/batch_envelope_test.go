package receiver_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

const (
	mewsToken      = "mews-url-token-1"
	mewsEnterprise = `"EnterpriseId":"851df8c8-90f2-4c4a-8e01-a4fc46b25178","IntegrationId":"c8bee838-7fb1-4f4e-8fac-ac87008b2f90"`
)

// envelopeEnv is a receiver with a Mews source (a batch of thin events, a token in the
// URL) and the ota source (one event per request), both handed to ds by a running
// dispatcher. Its body limit leaves room for an envelope past the header's.
func envelopeEnv(t *testing.T, ds *downstream) *testEnv {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{mewsToken}})
	if err != nil {
		t.Fatal(err)
	}
	mews := receiver.Source{Name: "mews", Verifier: v, TTL: 5 * time.Minute, Batch: "/Events",
		Keys: receiver.KeySpec{KeyFields: []string{"/Discriminator", "/Value"}}, StatusField: "/Discriminator",
		ForwardURL: ds.srv.URL, MaxAttempts: 3, AttemptTimeout: time.Second, MaxBackoff: time.Second}
	ota := forwardSource(t, ds.srv.URL, 3)
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	srv := serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{ota, mews}, Store: db, MaxBody: 64 << 10}), nil)
	startDispatcher(t, db, ota, mews)
	return &testEnv{db: db, srv: srv, src: ota}
}

// mewsBatch is a Mews General Webhooks request: the envelope's members, then Events,
// one ServiceOrderUpdated per id, laid out as a sender might indent it.
func mewsBatch(envelope string, ids ...string) string {
	var b strings.Builder
	b.WriteString("{\n  " + envelope + ",\n  \"Events\": [")
	for i, id := range ids {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n    {\"Discriminator\": \"ServiceOrderUpdated\", \"Value\": {\"Id\": %q}}", id)
	}
	b.WriteString("\n  ]\n}")
	return b.String()
}

// handOffs waits until ds has taken n hand-offs and returns their headers by
// Idempotency-Key.
func handOffs(t *testing.T, ds *downstream, n int) map[string]http.Header {
	t.Helper()
	storagetest.Eventually(t, 10*time.Second, func() error {
		if got := ds.received(); len(got) < n {
			return fmt.Errorf("downstream took %d hand-offs, want %d", len(got), n)
		}
		return nil
	})
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := map[string]http.Header{}
	for _, h := range ds.headers {
		out[h.Get("Idempotency-Key")] = h
	}
	return out
}

// postMews sends a Mews batch and returns its items' keys, in order.
func postMews(t *testing.T, e *testEnv, body string) []string {
	t.Helper()
	code, a := postBatch(t, e.srv.URL, "/webhooks/mews?token="+mewsToken, body)
	if code != http.StatusOK || a.Status != "batch" {
		t.Fatalf("Mews batch: %d %+v", code, a)
	}
	var keys []string
	for _, it := range a.Items {
		keys = append(keys, it.Key)
	}
	return keys
}

// TestBatch_EnvelopeForwarded: every item of a Mews batch is handed downstream with
// what the request said of them all (the enterprise and the integration), which the
// item alone does not say, and is stored with it; a delivery that came alone gets no
// such header.
func TestBatch_EnvelopeForwarded(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	e := envelopeEnv(t, ds)
	keys := postMews(t, e, mewsBatch(mewsEnterprise, "a1", "a2", "a3"))
	if code, a, _ := e.post(t, "ota", "msg_1", cancellation, nil); code != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("ota: %d %+v", code, a)
	}
	got := handOffs(t, ds, 4)
	want := "{" + mewsEnterprise + "}"
	for i, k := range keys {
		h := got["mews:"+k]
		if h == nil {
			t.Fatalf("item %d (key %s) was not handed downstream: %v", i, k, ds.received())
		}
		if env := h.Get("X-Hookdedup-Batch-Envelope"); env != want {
			t.Errorf("item %d handed on with envelope %q, want %q", i, env, want)
		}
		if o := h.Values("X-Hookdedup-Batch-Envelope-Omitted"); o != nil {
			t.Errorf("item %d handed on with %q omitted, and the envelope fits", i, o)
		}
	}
	alone := got["ota:msg_1"]
	if alone == nil {
		t.Fatalf("the ota delivery was not handed downstream: %v", ds.received())
	}
	for _, name := range []string{"X-Hookdedup-Batch-Envelope", "X-Hookdedup-Batch-Envelope-Omitted", "X-Hookdedup-Batch"} {
		if v := alone.Values(name); v != nil {
			t.Errorf("a delivery that came alone was handed on with %s: %q", name, v)
		}
	}

	ctx := context.Background()
	page, err := e.db.Deliveries(ctx, storage.DeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, listed := range page.Deliveries {
		d, err := e.db.Delivery(ctx, listed.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch d.Source {
		case "mews":
			if d.BatchEnvelope != want {
				t.Errorf("item %d stored with envelope %q, want %q", d.BatchIndex, d.BatchEnvelope, want)
			}
		case "ota":
			if d.BatchEnvelope != "" {
				t.Errorf("the ota delivery stored with envelope %q, want none", d.BatchEnvelope)
			}
		}
	}
}

// TestBatch_EnvelopeNonASCII: an envelope with text beyond ASCII is stored as sent and
// handed on as plain ASCII, each such character escaped as JSON does, so that the
// header reads as the same JSON.
func TestBatch_EnvelopeNonASCII(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	e := envelopeEnv(t, ds)
	envelope := mewsEnterprise + `,"EnterpriseName":"Hôtel Zürich 東京 😀"`
	keys := postMews(t, e, mewsBatch(envelope, "b1", "b2"))
	got := handOffs(t, ds, 2)
	const want = `{` + mewsEnterprise + `,"EnterpriseName":"H\u00f4tel Z\u00fcrich \u6771\u4eac \ud83d\ude00"}`
	for i, k := range keys {
		env := got["mews:"+k].Get("X-Hookdedup-Batch-Envelope")
		if env != want {
			t.Errorf("item %d handed on with envelope %q, want %q", i, env, want)
		}
		var sent, stored any
		if err := json.Unmarshal([]byte(env), &sent); err != nil {
			t.Fatalf("item %d: the header is not JSON: %v", i, err)
		}
		if err := json.Unmarshal([]byte("{"+envelope+"}"), &stored); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sent, stored) {
			t.Errorf("item %d: the header reads %v, the request said %v", i, sent, stored)
		}
	}
	page, err := e.db.Deliveries(context.Background(), storage.DeliveryFilter{Source: "mews"})
	if err != nil || len(page.Deliveries) != 2 {
		t.Fatalf("stored: %d, %v", len(page.Deliveries), err)
	}
	d, err := e.db.Delivery(context.Background(), page.Deliveries[0].ID)
	if err != nil || d.BatchEnvelope != "{"+envelope+"}" {
		t.Errorf("stored envelope %q, %v; want the sender's text %q", d.BatchEnvelope, err, "{"+envelope+"}")
	}
}

// TestBatch_EnvelopeTooLargeForAHeader: an envelope whose header would pass
// BatchEnvelopeHeaderMax bytes (counted as sent, escapes and all) is not sent; its
// size is, and the items go on. One of exactly that size is sent whole. Every item of
// a request with one larger than that as sent reads it whole and goes downstream with
// its size.
func TestBatch_EnvelopeTooLargeForAHeader(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	e := envelopeEnv(t, ds)
	// "é" is two bytes as sent and six in the header (\u00e9): the limit is the
	// header's, not the request's.
	pad := func(ascii int) string {
		return `"EnterpriseId":"x","Pad":"` + strings.Repeat("é", 600) + strings.Repeat("a", ascii) + `"`
	}
	base := len(`{"EnterpriseId":"x","Pad":""}`) + 600*6
	fits := pad(storage.BatchEnvelopeHeaderMax - base)
	over := pad(storage.BatchEnvelopeHeaderMax - base + 1)
	large := `"EnterpriseId":"x","Pad":"` + strings.Repeat("a", storage.BatchEnvelopeHeaderMax) + `"`
	fitKeys := postMews(t, e, mewsBatch(fits, "c1"))
	overKeys := postMews(t, e, mewsBatch(over, "d1", "d2"))
	largeKeys := postMews(t, e, mewsBatch(large, "e1", "e2", "e3"))
	got := handOffs(t, ds, 6)

	h := got["mews:"+fitKeys[0]]
	if env := h.Get("X-Hookdedup-Batch-Envelope"); len(env) != storage.BatchEnvelopeHeaderMax ||
		env != storage.BatchEnvelopeHeader("{"+fits+"}") {
		t.Errorf("an envelope of exactly %d bytes: header of %d bytes, omitted %q; want it whole",
			storage.BatchEnvelopeHeaderMax, len(env), h.Get("X-Hookdedup-Batch-Envelope-Omitted"))
	}
	for i, k := range overKeys {
		h := got["mews:"+k]
		if v := h.Values("X-Hookdedup-Batch-Envelope"); v != nil {
			t.Errorf("item %d handed on with an envelope of %d bytes, past the limit", i, len(v[0]))
		}
		if o, want := h.Get("X-Hookdedup-Batch-Envelope-Omitted"), fmt.Sprintf("%d bytes", storage.BatchEnvelopeHeaderMax+1); o != want {
			t.Errorf("item %d: X-Hookdedup-Batch-Envelope-Omitted %q, want %q", i, o, want)
		}
	}
	for i, k := range largeKeys {
		o, want := got["mews:"+k].Get("X-Hookdedup-Batch-Envelope-Omitted"), fmt.Sprintf("%d bytes", len(large)+2)
		if o != want {
			t.Errorf("large envelope, item %d: X-Hookdedup-Batch-Envelope-Omitted %q, want %q", i, o, want)
		}
	}

	ctx := context.Background()
	page, err := e.db.Deliveries(ctx, storage.DeliveryFilter{Source: "mews"})
	if err != nil || len(page.Deliveries) != 6 {
		t.Fatalf("stored: %d, %v", len(page.Deliveries), err)
	}
	want := map[string]string{"d1": "{" + over + "}", "d2": "{" + over + "}", "e1": "{" + large + "}", "e2": "{" + large + "}", "e3": "{" + large + "}"}
	for _, listed := range page.Deliveries {
		d, err := e.db.Delivery(ctx, listed.ID)
		if err != nil {
			t.Fatal(err)
		}
		var id struct{ Value struct{ Id string } }
		json.Unmarshal(d.Body, &id)
		if w, ok := want[id.Value.Id]; ok && d.BatchEnvelope != w {
			t.Errorf("item %s read with an envelope of %d bytes, want it whole (%d bytes)", id.Value.Id, len(d.BatchEnvelope), len(w))
		}
	}
}

// storedEnvelopes returns how many of the mews deliveries in e's database keep an
// envelope of their own, and its bytes in all, read from the table itself: reading a
// delivery would not tell an item's own copy from its first item's.
func storedEnvelopes(t *testing.T, e *testEnv) (copies, bytes int) {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+e.db.Path()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.QueryRow(`SELECT count(*), coalesce(sum(length(batch_envelope)), 0) FROM deliveries
		WHERE source = 'mews' AND batch_envelope <> ''`).Scan(&copies, &bytes); err != nil {
		t.Fatal(err)
	}
	return copies, bytes
}

// TestBatch_EnvelopeStoredOnce: a request's envelope is stored once, with its first
// item, however small it is and however many of its items are duplicates: a request of
// many tiny events with an envelope just under a header's size would otherwise store
// that envelope again with each. Every item still reads it and goes downstream with
// it, the item accepted in a redelivered request whose first item is a duplicate too.
func TestBatch_EnvelopeStoredOnce(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	e := envelopeEnv(t, ds)
	envelope := mewsEnterprise + `,"Pad":"` + strings.Repeat("p", storage.BatchEnvelopeHeaderMax-len(mewsEnterprise)-12) + `"`
	want := "{" + envelope + "}"
	if len(storage.BatchEnvelopeHeader(want)) > storage.BatchEnvelopeHeaderMax {
		t.Fatalf("the envelope's header is %d bytes, past the limit: it would not be sent", len(storage.BatchEnvelopeHeader(want)))
	}
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = fmt.Sprintf("f%d", i)
	}
	keys := postMews(t, e, mewsBatch(envelope, ids...))
	// Redelivered with one event more, and one of its events twice: item 0 is a
	// duplicate, and only the last is accepted.
	again := postMews(t, e, mewsBatch(envelope, append(append(ids[:len(ids):len(ids)], "f0"), "g1")...))
	keys = append(keys, again[len(again)-1])
	got := handOffs(t, ds, len(keys))

	if copies, bytes := storedEnvelopes(t, e); copies != 2 || bytes != 2*len(want) {
		t.Errorf("two requests' envelopes stored %d times (%d bytes), want once each, with the first item (%d bytes)",
			copies, bytes, 2*len(want))
	}
	for i, k := range keys {
		h := got["mews:"+k]
		if h == nil {
			t.Fatalf("key %s was not handed downstream", k)
		}
		if env := h.Get("X-Hookdedup-Batch-Envelope"); env != want {
			t.Errorf("key %d handed on with an envelope of %d bytes, want its request's (%d bytes)", i, len(env), len(want))
		}
	}
	ctx := context.Background()
	page, err := e.db.Deliveries(ctx, storage.DeliveryFilter{Source: "mews", Limit: 200})
	if err != nil || len(page.Deliveries) != 2*len(ids)+2 {
		t.Fatalf("stored: %d, %v; want %d", len(page.Deliveries), err, 2*len(ids)+2)
	}
	for _, listed := range page.Deliveries {
		d, err := e.db.Delivery(ctx, listed.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.BatchEnvelope != want {
			t.Errorf("delivery %d (item %d, %s) read with an envelope of %d bytes, want its request's", d.ID, d.BatchIndex, d.Outcome, len(d.BatchEnvelope))
		}
	}
}
