package web_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// hostileEnvelope is an envelope whose text a page or an answer must never pass on
// as markup.
const hostileEnvelope = `{"EnterpriseId":"851df8c8","Note":"<script>alert(1)</script>","City":"Zürich"}`

// recordEnvelopeBatch stores a batched request of source with envelope, two items, and
// returns them.
func recordEnvelopeBatch(t *testing.T, db *sqlite.DB, source, envelope string, keys ...string) []*storage.Delivery {
	t.Helper()
	var items []*storage.Delivery
	for _, k := range keys {
		items = append(items, &storage.Delivery{Source: source, Status: 200, Key: k, KeyMethod: "event_id", KeyFrom: "/id",
			PayloadHash: "h-" + k, ContentType: "application/json", Body: []byte(`{"id":"` + k + `"}`), BatchEnvelope: envelope})
	}
	if err := db.RecordBatch(context.Background(), items, storage.ClaimOptions{TTL: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	return items
}

// TestConsole_BatchEnvelope: an item's page shows what its request held besides its
// events, as text, and says how it goes downstream: in a header, or, too large for
// one, by its size.
func TestConsole_BatchEnvelope(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	items := recordEnvelopeBatch(t, e.db, "pms", hostileEnvelope, "m1", "m2")

	t.Run("Shown", func(t *testing.T) {
		code, body, _ := c.do(http.MethodGet, fmt.Sprintf("/events/%d", items[1].ID), nil)
		if code != http.StatusOK {
			t.Fatalf("GET = %d", code)
		}
		if strings.Contains(body, "<script>alert(1)") {
			t.Fatal("the envelope's text is on the page as markup")
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatal("the envelope's text is not on the page, escaped")
		}
		p := parsePage(t, body)
		// Members in the sender's order, one a line (text() reads runs of white space as
		// one space); the markup as text.
		want := `{ "EnterpriseId": "851df8c8", "Note": "<script>alert(1)</script>", "City": "Zürich" }`
		if got := p.testid("batch-envelope-json").text(); got != want {
			t.Errorf("envelope shown as %q, want %q", got, want)
		}
		if !strings.Contains(p.testid("batch-envelope-forwarded").text(), "X-Hookdedup-Batch-Envelope") {
			t.Error("the page does not say the envelope goes downstream in X-Hookdedup-Batch-Envelope")
		}
	})

	t.Run("TooLargeForAHeader", func(t *testing.T) {
		big := `{"Pad":"` + strings.Repeat("é", storage.BatchEnvelopeHeaderMax/6+1) + `"}`
		large := recordEnvelopeBatch(t, e.db, "pms", big, "l1")
		_, p := c.page(fmt.Sprintf("/events/%d", large[0].ID))
		size := len(storage.BatchEnvelopeHeader(big))
		if got := p.testid("batch-envelope-omitted").text(); !strings.Contains(got, fmt.Sprintf("X-Hookdedup-Batch-Envelope-Omitted: %d bytes", size)) {
			t.Errorf("an envelope too large for a header: the page says %q", got)
		}
		if p.testid("batch-envelope-forwarded").len() != 0 {
			t.Error("an envelope too large for a header is said to go in one")
		}
	})

	// As intake stores every envelope, small or large: with the first item only.
	t.Run("StoredOnce", func(t *testing.T) {
		for _, envelope := range []string{`{"live":"true"}`, `{"Pad":"` + strings.Repeat("a", storage.BatchEnvelopeHeaderMax) + `"}`} {
			items := []*storage.Delivery{
				{Source: "pms", Status: 200, Key: "t1-" + envelope[:5], KeyMethod: "event_id", PayloadHash: "t1", Body: []byte(`{}`), BatchEnvelope: envelope},
				{Source: "pms", Status: 200, Key: "t2-" + envelope[:5], KeyMethod: "event_id", PayloadHash: "t2", Body: []byte(`{}`)},
			}
			if err := e.db.RecordBatch(context.Background(), items, storage.ClaimOptions{TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			_, p := c.page(fmt.Sprintf("/events/%d", items[1].ID))
			if got, want := p.testid("batch-envelope-json").text(), strings.NewReplacer(`{`, `{ `, `}`, ` }`, `:`, `: `).Replace(envelope); got != want {
				t.Errorf("the second item shows an envelope of %d bytes, want its first item's (%d bytes)", len(got), len(want))
			}
			shared := p.testid("batch-envelope-shared")
			if hrefs := shared.hrefs(); len(hrefs) != 1 || hrefs[0] != fmt.Sprintf("/events/%d", items[0].ID) {
				t.Errorf("envelope of %d bytes: the second item does not say it is stored with the first: %q", len(envelope), shared.text())
			}
			if omitted := p.testid("batch-envelope-omitted").len() == 1; omitted != (len(envelope) > storage.BatchEnvelopeHeaderMax) {
				t.Errorf("envelope of %d bytes: said to be left out of the hand-off: %t", len(envelope), omitted)
			}
			if _, p := c.page(fmt.Sprintf("/events/%d", items[0].ID)); p.testid("batch-envelope-shared").len() != 0 {
				t.Error("the first item says its envelope is stored elsewhere")
			}
		}
	})

	t.Run("RecordOnlySource", func(t *testing.T) {
		kept := recordEnvelopeBatch(t, e.db, "ota", `{"live":"false"}`, "o1")
		_, p := c.page(fmt.Sprintf("/events/%d", kept[0].ID))
		if p.testid("batch-envelope-json").text() != `{ "live": "false" }` || p.testid("batch-envelope-forwarded").len() != 0 {
			t.Error("a record-only source's envelope: not shown, or said to go downstream")
		}
	})

	t.Run("StoredWithout", func(t *testing.T) {
		old := recordEnvelopeBatch(t, e.db, "pms", "", "n1")
		_, p := c.page(fmt.Sprintf("/events/%d", old[0].ID))
		if p.testid("batch-envelope-none").len() != 1 || p.testid("batch-envelope-json").len() != 0 {
			t.Error("an item stored without an envelope does not say it has none")
		}
	})

	t.Run("DeliveryAlone", func(t *testing.T) {
		_, p := c.page(fmt.Sprintf("/events/%d", alone(t, e).ID))
		if p.testid("batch-envelope").len() != 0 {
			t.Error("a delivery that came alone shows an envelope")
		}
	})

	// The export gives each item its request's envelope, the one stored with its first
	// item too, and a delivery that came alone none; an envelope over 4096 bytes, its
	// size.
	t.Run("CSV", func(t *testing.T) {
		largeEnvelope := `{"Pad":"` + strings.Repeat("ü", 2100) + `"}`
		large := recordEnvelopeBatch(t, e.db, "pms", largeEnvelope, "csv1", "csv2")
		single := alone(t, e)
		_, body, _ := c.do(http.MethodGet, "/events.csv?source=pms", nil)
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil || len(recs) < 2 {
			t.Fatalf("csv: %v, %d records", err, len(recs))
		}
		head := recs[0]
		at := func(name string) int {
			i := slices.Index(head, name)
			if i < 0 {
				t.Fatalf("no column %s in %v", name, head)
			}
			return i
		}
		id, envelope := at("id"), at("batch_envelope")
		got := map[string]string{}
		for _, rec := range recs[1:] {
			got[rec[id]] = rec[envelope]
		}
		for _, want := range []struct {
			d        *storage.Delivery
			envelope string
		}{{items[0], hostileEnvelope}, {items[1], hostileEnvelope}, {single, ""},
			{large[0], "omitted: 4210 bytes"}, {large[1], "omitted: 4210 bytes"}} {
			if g, ok := got[fmt.Sprint(want.d.ID)]; !ok || g != want.envelope {
				t.Errorf("delivery %d exported with envelope %q, want %q", want.d.ID, g, want.envelope)
			}
		}
	})
}

// alone records a delivery of pms that came alone.
func alone(t *testing.T, e *consoleEnv) *storage.Delivery {
	t.Helper()
	d := &storage.Delivery{Source: "pms", Status: 200, Key: "alone-" + t.Name(), KeyMethod: "event_id", PayloadHash: "a", Body: []byte(`{}`)}
	if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestConsole_BatchEnvelopeFirstItemSwept: retention keeps a request's first item, a
// duplicate, while an item after it is still owed downstream, so that the item shows
// its envelope and the page it sends the operator to for it is there.
func TestConsole_BatchEnvelopeFirstItemSwept(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.as(t, "viewer")
	ctx := context.Background()
	if err := e.db.Record(ctx, &storage.Delivery{Source: "pms", Status: 200, Key: "w0", KeyMethod: "event_id",
		PayloadHash: "h-w0", Body: []byte(`{"id":"w0"}`)}, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	items := []*storage.Delivery{
		{Source: "pms", Status: 200, Key: "w0", KeyMethod: "event_id", PayloadHash: "h-w0", Body: []byte(`{"id":"w0"}`), BatchEnvelope: `{"live":"true"}`},
		{Source: "pms", Status: 200, Key: "w1", KeyMethod: "event_id", PayloadHash: "h-w1", Body: []byte(`{"id":"w1"}`)},
	}
	if err := e.db.RecordBatch(ctx, items, storage.ClaimOptions{TTL: time.Hour, Dispatch: true}); err != nil {
		t.Fatal(err)
	}
	sweepPayloads(t, e.db)
	if code, _, _ := c.do(http.MethodGet, fmt.Sprintf("/events/%d", items[0].ID), nil); code != http.StatusOK {
		t.Fatalf("the first item after the sweep: %d, want it kept for the item still owed", code)
	}
	_, p := c.page(fmt.Sprintf("/events/%d", items[1].ID))
	if got := p.testid("batch-envelope-json").text(); got != `{ "live": "true" }` {
		t.Errorf("the item kept shows envelope %q, want its request's", got)
	}
	if shared := p.testid("batch-envelope-shared"); !slices.Contains(shared.hrefs(), fmt.Sprintf("/events/%d", items[0].ID)) {
		t.Errorf("the item kept does not send the operator to its first item for the envelope: %q", shared.text())
	}
}

// TestAPI_BatchEnvelope: a delivery read whole carries its request's envelope as the
// JSON it is, its markup escaped in the answer; a delivery that came alone has none.
func TestAPI_BatchEnvelope(t *testing.T) {
	e := newAPIEnv(t)
	items := recordEnvelopeBatch(t, e.db, "ota", hostileEnvelope, "m1", "m2")
	get := func(id int64) string { return string(e.delivery(t, id)) }
	raw := get(items[1].ID)
	if strings.Contains(raw, "<script>") || !strings.Contains(raw, `\u003cscript\u003e`) {
		t.Errorf("the envelope's markup is not escaped in the answer: %s", raw)
	}
	var out struct {
		Delivery struct {
			BatchEnvelope map[string]string `json:"batch_envelope"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"EnterpriseId": "851df8c8", "Note": "<script>alert(1)</script>", "City": "Zürich"}
	if fmt.Sprint(out.Delivery.BatchEnvelope) != fmt.Sprint(want) {
		t.Errorf("batch_envelope %v, want %v", out.Delivery.BatchEnvelope, want)
	}
	alone := e.record(t, "evt_alone", `{"id":"evt_alone"}`, false)
	if raw := get(alone.ID); strings.Contains(raw, "batch_envelope") {
		t.Errorf("a delivery that came alone has a batch_envelope: %s", raw)
	}
}

// TestAPI_BatchEnvelopeWide: an envelope that indenting would grow by more than the
// console shows indented is given as batch_envelope_text, as sent, as such a body is
// given as body_text: the answer's own indentation made megabytes of it for each item.
func TestAPI_BatchEnvelopeWide(t *testing.T) {
	e := newAPIEnv(t)
	wide := `{"rates":` + strings.Repeat("[", 60) + strings.TrimSuffix(strings.Repeat("1,", 80000), ",") + strings.Repeat("]", 60) + `}`
	items := recordEnvelopeBatch(t, e.db, "ota", wide, "w1", "w2")
	raw := e.delivery(t, items[1].ID)
	var out struct {
		Delivery struct {
			BatchEnvelope     json.RawMessage `json:"batch_envelope"`
			BatchEnvelopeText string          `json:"batch_envelope_text"`
		} `json:"delivery"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out.Delivery.BatchEnvelope != nil || out.Delivery.BatchEnvelopeText != wide || len(raw) > len(wide)+8<<10 {
		t.Errorf("an envelope of %d bytes 60 levels deep: batch_envelope of %d bytes, batch_envelope_text of %d, an answer of %d bytes; "+
			"want it as batch_envelope_text alone", len(wide), len(out.Delivery.BatchEnvelope), len(out.Delivery.BatchEnvelopeText), len(raw))
	}
}
