package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// deepBody is JSON nested depth levels deep: valid to encoding/json (10,000 levels),
// refused by intake past 64 and then stored as a rejection's body on a source that
// authenticates its senders. Indented, each level's line carries the indentation of
// all those above it: 4,000 levels in 8 KB would make 32 MB of spaces.
func deepBody(depth int) string {
	return `{"event_id":"evt_deep","x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
}

// TestConsole_DeepBodyShownAsSent: a body nested deeper than intake reads is shown on
// its delivery's page as it was sent, not indented: indentation grows with the square
// of the depth, and a few kilobytes from a sender made a page of hundreds of megabytes
// for whoever opened the rejection.
func TestConsole_DeepBodyShownAsSent(t *testing.T) {
	e := newConsoleEnv(t)
	body := deepBody(4000)
	d := &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 400,
		Error: "body is not valid JSON: nested deeper than 64 levels at byte 87", ContentType: "application/json", Body: []byte(body)}
	if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	code, page := e.as(t, storage.RoleViewer).get("/events/" + idStr(d.ID))
	if code != http.StatusOK {
		t.Fatalf("GET the delivery: %d", code)
	}
	if len(page) > len(body)+64<<10 {
		t.Errorf("the page is %d bytes for a body of %d; want the body as sent, not indented", len(page), len(body))
	}
	if !strings.Contains(page, strings.Repeat("[", 4000)+strings.Repeat("]", 4000)) {
		t.Errorf("the page does not show the body as it was sent")
	}
	// A body as deep as intake reads is still indented.
	ok := &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 400, Error: "signature: no match",
		ContentType: "application/json", Body: []byte(deepBody(63))}
	if err := e.db.Record(context.Background(), ok, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, page := e.as(t, storage.RoleViewer).get("/events/" + idStr(ok.ID)); !strings.Contains(page, "[\n") {
		t.Errorf("a body 64 levels deep is not indented")
	}
}

// TestAPI_DeepBodyAsText: the API gives a body nested deeper than intake reads as
// body_text: as body, the answer's indentation re-indented it, and a few kilobytes
// made an answer of hundreds of megabytes. One as deep as intake reads stays body.
func TestAPI_DeepBodyAsText(t *testing.T) {
	e := newAPIEnv(t)
	get := func(body string) (json.RawMessage, string, int) {
		t.Helper()
		d := &storage.Delivery{Source: "ota", Outcome: storage.Rejected, Status: 400, Error: "body is not valid JSON",
			ContentType: "application/json", Body: []byte(body)}
		if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		raw := e.delivery(t, d.ID)
		var out struct {
			Delivery struct {
				Body     json.RawMessage `json:"body"`
				BodyText string          `json:"body_text"`
			} `json:"delivery"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out.Delivery.Body, out.Delivery.BodyText, len(raw)
	}
	deep := deepBody(4000)
	if b, text, n := get(deep); b != nil || text != deep || n > len(deep)+8<<10 {
		t.Errorf("a body 4,000 levels deep: body of %d bytes, body_text of %d, an answer of %d bytes; want it as body_text alone",
			len(b), len(text), n)
	}
	if b, text, _ := get(deepBody(63)); b == nil || text != "" {
		t.Errorf("a body 64 levels deep: body %.40s, body_text %.40q; want it as body", b, text)
	}
	// Within intake's depth, a body whose indentation would add more than the console
	// shows indented: the answer's own indentation would make 40 MB of 160 KB.
	wide := `{"x":` + strings.Repeat("[", 60) + strings.TrimSuffix(strings.Repeat("1,", 80000), ",") + strings.Repeat("]", 60) + `}`
	if b, text, n := get(wide); b != nil || text != wide || n > len(wide)+8<<10 {
		t.Errorf("a body of %d bytes 60 levels deep: body of %d bytes, body_text of %d, an answer of %d bytes; want it as body_text alone",
			len(wide), len(b), len(text), n)
	}
}

// TestConsole_WideBodyShownAsSent: a body within intake's nesting whose indentation
// would add megabytes (an array of ones 60 levels deep, each one a line of 120 spaces)
// is shown as sent, on its page and in the comparison with its duplicate: indented, a
// megabyte from a sender made a page of 62 MB, three times over with a duplicate. A
// payload of a usual shape is still indented.
func TestConsole_WideBodyShownAsSent(t *testing.T) {
	e := newConsoleEnv(t)
	wide := func(n int) string {
		return `{"event_id":"evt_wide","x":` + strings.Repeat("[", 60) + strings.TrimSuffix(strings.Repeat("1,", n), ",") + strings.Repeat("]", 60) + `}`
	}
	var ids []int64
	for _, body := range []string{wide(40000), wide(40001)} {
		d := &storage.Delivery{Source: "ota", Key: "evt_wide", KeyMethod: "event_id", KeyFrom: "/event_id", PayloadHash: body[len(body)-70:],
			ContentType: "application/json", Body: []byte(body)}
		if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	viewer := e.as(t, storage.RoleViewer)
	code, page := viewer.get("/events/" + idStr(ids[1]))
	if code != http.StatusOK {
		t.Fatalf("GET the duplicate: %d", code)
	}
	if limit := 3*len(wide(40001)) + 256<<10; len(page) > limit {
		t.Errorf("the duplicate's page is %d bytes for bodies of %d; want at most %d, the bodies as sent", len(page), len(wide(40001)), limit)
	}
	if !strings.Contains(page, strings.Repeat("[", 60)+"1,1,1") {
		t.Errorf("the page does not show the body as sent")
	}
	// The console's own payloads, of a usual shape, are still indented.
	if _, page := viewer.get("/events/" + idStr(e.first.ID)); !strings.Contains(page, "{\n  &#34;booking_id&#34;: &#34;BK-42&#34;") {
		t.Errorf("a usual payload is not indented")
	}
}
