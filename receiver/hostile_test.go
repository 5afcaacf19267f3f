package receiver_test

// Hostile input through the real handler, over a real database: each gets a
// clear error, and nothing is stored that should not be (no claim, no body from an
// unauthenticated sender).

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// hostileClock is the one clock of the receiver (signature timestamps) and the database
// (claims, expiry), so that a test can let a claim expire.
type hostileClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *hostileClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *hostileClock) Add(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

// hostileEnv is a receiver with a 4 KiB body limit on a real database, on a real HTTP
// server with the production server's timeouts scaled down.
type hostileEnv struct {
	*testEnv
	clock *hostileClock
}

func newHostileEnv(t *testing.T, srvConfig func(*http.Server), sources ...receiver.Source) *hostileEnv {
	t.Helper()
	db := storagetest.Open(t)
	clock := &hostileClock{}
	db.Now = clock.Now
	if len(sources) == 0 {
		sources = []receiver.Source{otaSource(t)}
	}
	// These tests look at each rejection's stored row: no sampling (rejections_test.go
	// tests the bounds).
	rc := receiver.New(receiver.Config{Sources: sources, Store: db, MaxBody: 4096, Now: clock.Now,
		Rejections: receiver.RejectionLimits{PerAddress: 1 << 20, Total: 1 << 20}})
	srv := serveReceiver(t, rc, srvConfig)
	return &hostileEnv{testEnv: &testEnv{db: db, srv: srv, src: sources[0]}, clock: clock}
}

// counts returns the stored deliveries by outcome.
func (e *testEnv) counts(t *testing.T) storagetest.Counts {
	t.Helper()
	c, err := storagetest.CountDeliveries(context.Background(), e.db, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lastDelivery returns the newest stored delivery.
func (e *hostileEnv) lastDelivery(t *testing.T) storage.Delivery {
	t.Helper()
	c := e.counts(t)
	d, err := e.db.Delivery(context.Background(), c.Accepted+c.Duplicate+c.Rejected)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// expectRejected checks that the last answer was code with an error naming want, that
// exactly one more rejection was stored (with its body only if keepBody), and that no
// key was claimed.
func (e *hostileEnv) expectRejected(t *testing.T, before storagetest.Counts, code int, a answer, gotCode, wantCode int, want string, keepBody bool) {
	t.Helper()
	if gotCode != wantCode || a.Status != "" || a.Error == "" || !strings.Contains(a.Error, want) {
		t.Fatalf("got %d %+v, want %d with an error naming %q", gotCode, a, wantCode, want)
	}
	after := e.counts(t)
	if after.Rejected != before.Rejected+1 || after.Accepted != before.Accepted || after.Duplicate != before.Duplicate {
		t.Fatalf("stored %+v -> %+v, want exactly one more rejection", before, after)
	}
	d := e.lastDelivery(t)
	if d.Outcome != storage.Rejected || d.Status != wantCode || d.Key != "" {
		t.Fatalf("stored %+v, want a rejection with status %d and no key", d, wantCode)
	}
	if keepBody != (len(d.Body) > 0) {
		t.Fatalf("stored body %d bytes; want it kept: %v", len(d.Body), keepBody)
	}
	keys, err := e.db.ListKeys(context.Background(), storage.KeyFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(keys)) != after.Accepted {
		t.Fatalf("%d claims for %d accepted deliveries: a rejection claimed a key", len(keys), after.Accepted)
	}
	_ = code
}

func TestHostile_BodyLimit(t *testing.T) {
	e := newHostileEnv(t, nil)
	pad := func(n int) string { // a valid body of exactly n bytes
		const head, tail = `{"booking_id":"BK-1","status":"cancelled","pad":"`, `"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	if code, a, _ := e.post(t, "ota", "msg_at_limit", pad(4096), nil); code != 200 || a.Status != "accepted" {
		t.Fatalf("a body of exactly the limit: %d %+v", code, a)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*http.Request)
	}{
		{"OneByteOver", nil},
		{"Chunked", func(r *http.Request) { r.ContentLength = -1; r.TransferEncoding = []string{"chunked"} }},
		// The limit is on what is read, whatever the sender declares.
		{"UnderDeclared", func(r *http.Request) {
			r.ContentLength = -1
			r.Body = io.NopCloser(io.MultiReader(strings.NewReader(pad(4097)), strings.NewReader(strings.Repeat(" ", 1<<20))))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.counts(t)
			code, a, _ := e.post(t, "ota", "msg_over", pad(4097), tc.mutate)
			// Unverified (the body was never read whole): metadata only.
			e.expectRejected(t, before, 0, a, code, 413, "larger than the limit of 4096 bytes", false)
		})
	}
	// A big gzip "bomb" is not inflated: its coding is refused before anything reads it.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(bytes.Repeat([]byte(`{"a":1}`), 300000))
	zw.Close()
	if z.Len() > 4096 {
		t.Fatalf("gzip bomb is %d bytes", z.Len())
	}
	before := e.counts(t)
	code, a, _ := e.post(t, "ota", "msg_gzip", z.String(), func(r *http.Request) { r.Header.Set("Content-Encoding", "gzip") })
	e.expectRejected(t, before, 0, a, code, http.StatusUnsupportedMediaType, `Content-Encoding "gzip" is not supported`, false)
}

func TestHostile_JSON(t *testing.T) {
	e := newHostileEnv(t, nil)
	deep := func(n int) string {
		return strings.Repeat(`{"a":`, n) + `1` + strings.Repeat(`}`, n)
	}
	if code, a, _ := e.post(t, "ota", "msg_deep64", `{"booking_id":"BK-1","x":`+deep(63)+`}`, nil); code != 200 {
		t.Fatalf("64 levels deep: %d %+v", code, a)
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"Nested65", `{"booking_id":"BK-1","x":` + deep(64) + `}`, "nested deeper than 64 levels"},
		{"NestedToTheLimit", strings.Repeat("[", 4000), "nested deeper than 64 levels"},
		{"HugeNumber", `{"booking_id":"BK-1","amount":1e400}`, "number outside the float64 range"},
		{"HugeNegative", `{"booking_id":"BK-1","amount":-1e400}`, "number outside the float64 range"},
		{"HugeDigits", `{"booking_id":"BK-1","amount":` + strings.Repeat("9", 400) + `}`, "number outside the float64 range"},
		{"InvalidUTF8", "{\"booking_id\":\"BK-\xff1\"}", "invalid UTF-8 at byte 18"},
		{"OverlongUTF8", "{\"booking_id\":\"\xc0\xaf\"}", "invalid UTF-8"},
		{"ByteOrderMark", "\xef\xbb\xbf{\"booking_id\":\"BK-1\"}", "byte-order mark"},
		{"UTF16", "{\x00\"\x00b\x00\"\x00:\x00\"\x00B\x00\"\x00}\x00", "body is UTF-16 (little-endian), not UTF-8"},
		{"UTF16ByteOrderMark", "\xfe\xff\x00{\x00}", "body is UTF-16 (big-endian), not UTF-8"},
		{"DuplicateKey", `{"booking_id":"BK-1","status":"confirmed","status":"cancelled"}`, "duplicate object member name"},
		{"DuplicateKeyNested", `{"booking_id":"BK-1","refund":{"amount":1,"amount":100}}`, "duplicate object member name"},
		// The same name spelled twice: a parser that compares raw bytes would let it by.
		{"DuplicateKeyEscaped", `{"booking_id":"BK-1","status":"confirmed","st\u0061tus":"cancelled"}`, "duplicate object member name"},
		{"TrailingData", `{"booking_id":"BK-1"} {"booking_id":"BK-2"}`, "more data after the JSON value"},
		{"Empty", ``, "empty body"},
		{"NUL", "{\"booking_id\":\"BK\x001\"}", "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.counts(t)
			code, a, _ := e.post(t, "ota", "msg_"+tc.name, tc.body, nil)
			// Authenticated, so the body is kept for a look.
			e.expectRejected(t, before, 0, a, code, 400, tc.want, tc.body != "")
			if !strings.Contains(a.Error, "not valid JSON") {
				t.Errorf("error %q does not say the body is not valid JSON", a.Error)
			}
		})
	}
}

// TestHostile_EventIDInjection: an event id that would smuggle a header into the
// hand-off downstream (Idempotency-Key: <source>:<key>) never becomes a key.
func TestHostile_EventIDInjection(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	src := forwardSource(t, ds.srv.URL, 3)
	src.Keys = receiver.KeySpec{EventID: []string{"/id"}, KeyFields: []string{"/booking_id", "/status"}}
	e := newHostileEnv(t, nil, src)
	startDispatcher(t, e.db, src)

	for i, id := range []string{`evt_1\r\nX-Injected: yes`, `evt_2\nX-Injected: yes`, `evt_3\u0000`, `evt_4\u007f`, "derived:" + strings.Repeat("0", 64)} {
		body := fmt.Sprintf(`{"id":"%s","booking_id":"BK-%d","status":"cancelled"}`, id, i)
		code, a, _ := e.post(t, "ota", "msg_unused", body, nil)
		if code != 200 || !strings.HasPrefix(a.Key, "derived:") || strings.ContainsAny(a.Key, "\r\n\x00\x7f") {
			t.Fatalf("id %q: %d %+v, want the key derived from the business fields", id, code, a)
		}
		if strings.HasPrefix(id, "derived:") && a.Key == id {
			t.Fatalf("an event id took the shape of a derived key: %+v", a)
		}
	}
	// Without key fields to fall back on: 422, nothing claimed.
	src2 := otaSource(t)
	src2.Keys = receiver.KeySpec{EventID: []string{"/id"}}
	e2 := newHostileEnv(t, nil, src2)
	before := e2.counts(t)
	code, a, _ := e2.post(t, "ota", "msg_unused", `{"id":"evt\r\nX-Injected: yes"}`, nil)
	e2.expectRejected(t, before, 0, a, code, 422, "contains a control character", true)

	storagetest.Eventually(t, 10*time.Second, func() error {
		if got := len(ds.received()); got < 5 {
			return fmt.Errorf("the downstream got %d hand-offs, want 5", got)
		}
		return nil
	})
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if len(ds.headers) != 5 {
		t.Fatalf("the downstream got %d hand-offs, want 5", len(ds.headers))
	}
	for _, h := range ds.headers {
		if h.Get("X-Injected") != "" || !strings.HasPrefix(h.Get("Idempotency-Key"), "ota:derived:") {
			t.Fatalf("hand-off headers %v", h)
		}
	}
}

// hostileRaw sends raw bytes on a fresh connection and returns the status line and
// body of the answer.
// TestHostile_DeclaredTooLarge: a body whose Content-Length is over the limit is refused
// before any of it is read: a sender that asks to continue is not invited to upload it,
// and one that declared more than it sends is not held until the read timeout.
func TestHostile_DeclaredTooLarge(t *testing.T) {
	e := newHostileEnv(t, func(s *http.Server) { s.ReadTimeout = 10 * time.Second })
	for _, tc := range []struct{ name, head, body string }{
		{"ExpectContinue", "Expect: 100-continue\r\n", ""},
		{"ShortBody", "", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.counts(t)
			start := time.Now()
			code, raw := hostileRaw(t, e.srv.URL, "POST /webhooks/ota HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
				tc.head+"Content-Length: 99999999\r\n\r\n"+tc.body)
			var a answer
			json.Unmarshal([]byte(raw), &a)
			if code != http.StatusRequestEntityTooLarge || !strings.Contains(a.Error, "larger than the limit of 4096 bytes (Content-Length: 99999999)") {
				t.Fatalf("a declared body of 99999999 bytes: %d %s after %v; want 413 naming the limit and the length", code, raw, time.Since(start))
			}
			e.expectRejected(t, before, 0, a, code, 413, "larger than the limit", false)
		})
	}
}

func hostileRaw(t *testing.T, srvURL, raw string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srvURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", raw, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHostile_HeaderInjection sends bytes no well-behaved client would: control
// characters and invalid UTF-8 in the headers a key or a hand-off is made from.
func TestHostile_HeaderInjection(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	src := forwardSource(t, ds.srv.URL, 3)
	src.Keys = receiver.KeySpec{EventID: []string{"header:webhook-id"}, KeyFields: []string{"/booking_id"}}
	e := newHostileEnv(t, nil, src)
	startDispatcher(t, e.db, src)
	body := `{"booking_id":"BK-7","status":"cancelled"}`
	send := func(id, contentType string) (int, string) {
		h := http.Header{"Webhook-Id": {id}}
		src.Verifier.Sign(h, nil, []byte(body), time.Now())
		var b strings.Builder
		fmt.Fprintf(&b, "POST /webhooks/ota HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n", contentType, len(body))
		for _, k := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
			fmt.Fprintf(&b, "%s: %s\r\n", k, h.Get(k))
		}
		b.WriteString("\r\n" + body)
		return hostileRaw(t, e.srv.URL, b.String())
	}
	before := e.counts(t)
	for _, tc := range []struct {
		name, id, contentType string
		derived               bool // else net/http refuses it (400) before the handler
	}{
		{"ControlCharInID", "msg_\x01x", "application/json", false},
		{"DELInID", "msg_\x7fx", "application/json", false},
		{"InvalidUTF8InID", "msg_\xff\xfe", "application/json", true},
		{"ControlCharInContentType", "msg_ct", "application/json\x01", false},
		{"NULInContentType", "msg_nul", "application/json\x00; x=1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			was := e.counts(t)
			code, raw := send(tc.id, tc.contentType)
			if !tc.derived {
				// A header value with a control character never reaches the handler: it
				// cannot become a key, be stored, or be forwarded.
				if code != 400 || e.counts(t) != was {
					t.Fatalf("answered %d %q, want net/http's 400 and nothing stored", code, raw)
				}
				return
			}
			var a answer
			json.Unmarshal([]byte(raw), &a)
			if code != 200 || !strings.HasPrefix(a.Key, "derived:") {
				t.Fatalf("answered %d %q, want the key derived from the business fields", code, raw)
			}
		})
	}
	// Whatever was accepted is handed off, with clean headers.
	after := e.counts(t)
	accepted := after.Accepted - before.Accepted
	storagetest.Eventually(t, 10*time.Second, func() error {
		if got := len(ds.received()); int64(got) < accepted {
			keys, _ := e.db.ListKeys(context.Background(), storage.KeyFilter{})
			return fmt.Errorf("%d accepted keys, %d reached the downstream: %+v", accepted, got, keys)
		}
		return nil
	})
	if got := len(ds.received()); int64(got) != accepted {
		t.Fatalf("%d accepted keys, %d reached the downstream", accepted, got)
	}
}

// TestHostile_CredentialFloodNotStored: what an unauthenticated sender can make us store
// is bounded: no body, and headers within the server's header limit.
func TestHostile_UnauthenticatedStoresNoBody(t *testing.T) {
	e := newHostileEnv(t, nil)
	for _, tc := range []struct {
		name, source, id string
		code             int
	}{
		{"UnknownSource", "nope", "msg_1", 404},
		{"BadSignature", "ota", "", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.counts(t)
			code, a, _ := e.post(t, tc.source, tc.id, `{"booking_id":"spam","status":"`+strings.Repeat("s", 3000)+`"}`, nil)
			e.expectRejected(t, before, 0, a, code, tc.code, "", false)
		})
	}
}

// TestHostile_Replay: a captured delivery replayed within the tolerance is a duplicate
// (its key is held); replayed after its key expired, its signed timestamp is stale and it
// is refused, so it cannot be accepted, and dispatched, a second time.
func TestHostile_Replay(t *testing.T) {
	src := otaSource(t)
	src.TTL = time.Hour
	e := newHostileEnv(t, nil, src)
	ctx := context.Background()
	captured := http.Header{"Webhook-Id": {"msg_captured"}}
	if err := src.Verifier.Sign(captured, nil, []byte(cancellation), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	replay := func(r *http.Request) {
		for k, v := range captured {
			r.Header[k] = v
		}
	}
	code, first, _ := e.post(t, "ota", "", cancellation, replay)
	if code != 200 || first.Status != "accepted" {
		t.Fatalf("first: %d %+v", code, first)
	}
	code, again, _ := e.post(t, "ota", "", cancellation, replay)
	if code != 200 || again.Status != "duplicate" || again.FirstDelivery != first.Delivery {
		t.Fatalf("replay within the tolerance: %d %+v", code, again)
	}

	e.clock.Add(src.TTL + time.Minute) // the claim has expired; the signature is stale
	before := e.counts(t)
	code, late, _ := e.post(t, "ota", "", cancellation, replay)
	e.expectRejected(t, before, 0, late, code, 401, "outside", false)
	c, err := e.db.Claim(ctx, "ota", "msg_captured")
	if err != nil {
		t.Fatal(err)
	}
	if strconv.FormatInt(c.FirstDelivery, 10) != first.Delivery {
		t.Fatalf("the expired claim was taken over by a replay: %+v", c)
	}

	for name, at := range map[string]time.Time{
		"Future":   e.clock.Now().Add(10 * time.Minute),
		"Past":     e.clock.Now().Add(-10 * time.Minute),
		"Epoch":    time.Unix(0, 0),
		"Year3000": time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		t.Run(name, func(t *testing.T) {
			before := e.counts(t)
			code, a, _ := e.post(t, "ota", "", cancellation, func(r *http.Request) {
				r.Header.Set("webhook-id", "msg_"+name)
				src.Verifier.Sign(r.Header, nil, []byte(cancellation), at)
			})
			e.expectRejected(t, before, 0, a, code, 401, "signature", false)
		})
	}
	for name, ts := range map[string]string{"NotANumber": "soon", "Negative": "-1", "Huge": "99999999999999999999999", "Float": "1.5e9"} {
		t.Run("Timestamp"+name, func(t *testing.T) {
			before := e.counts(t)
			code, a, _ := e.post(t, "ota", "msg_ts", cancellation, func(r *http.Request) { r.Header.Set("webhook-timestamp", ts) })
			e.expectRejected(t, before, 0, a, code, 401, "signature", false)
		})
	}
}

// TestHostile_UnknownSources: odd names answer 404 (or the router's own refusal), are
// recorded under a bounded name, never claim, and never grow the metrics' label set.
func TestHostile_UnknownSources(t *testing.T) {
	e := newHostileEnv(t, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, name := range []string{
		"nope", strings.Repeat("n", 5000), "ota%2F..%2Fadmin", "%00", "%E2%80%AE", "ota%20", "OTA", "..%2F..%2Fetc%2Fpasswd",
	} {
		t.Run(name[:min(len(name), 20)], func(t *testing.T) {
			before := e.counts(t)
			resp, err := client.Post(e.srv.URL+"/webhooks/"+name, "application/json", strings.NewReader(cancellation))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var a answer
			json.Unmarshal(raw, &a)
			unescaped, _ := url.PathUnescape(name)
			e.expectRejected(t, before, 0, a, resp.StatusCode, 404, "unknown source", false)
			d := e.lastDelivery(t)
			if len(d.Source) > 64 || (len(unescaped) <= 64 && d.Source != unescaped) {
				t.Fatalf("recorded under source %q (%d bytes)", d.Source[:min(len(d.Source), 80)], len(d.Source))
			}
		})
	}
	// Paths the router refuses or redirects never reach a source.
	for _, path := range []string{"/webhooks/../webhooks/ota", "/webhooks/./ota", "/webhooks//ota", "/webhooks/ota/", "/webhooks/ota/x"} {
		before := e.counts(t)
		resp, err := client.Post(e.srv.URL+path, "application/json", strings.NewReader(cancellation))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 || e.counts(t).Accepted != before.Accepted {
			t.Fatalf("%s: %d, and accepted", path, resp.StatusCode)
		}
	}
	resp, err := http.Get(e.srv.URL + "/webhooks/ota")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("GET /webhooks/ota = %d, want 405", resp.StatusCode)
	}
	resp, err = http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(metrics, []byte("nope")) || bytes.Contains(metrics, []byte("nnnn")) {
		t.Fatal("an unknown source's name became a metric label")
	}
}

// TestHostile_SlowBody: a body that stops arriving is cut off by the server's read
// timeout; the delivery is refused, and is not claimed.
func TestHostile_SlowBody(t *testing.T) {
	t.Parallel() // waits on timers and locks of its own, with no tight time bound
	e := newHostileEnv(t, func(s *http.Server) { s.ReadTimeout = time.Second })
	body := `{"booking_id":"BK-slow","status":"cancelled"}`
	h := http.Header{"Webhook-Id": {"msg_slow"}}
	e.src.Verifier.Sign(h, nil, []byte(body), time.Now())
	var b strings.Builder
	fmt.Fprintf(&b, "POST /webhooks/ota HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n", len(body))
	h.Write(&b)
	b.WriteString("\r\n" + body[:10])
	before := e.counts(t)
	code, raw := hostileRaw(t, e.srv.URL, b.String())
	var a answer
	json.Unmarshal([]byte(raw), &a)
	if code == 200 || a.Status != "" {
		t.Fatalf("a body that never arrived: %d %s", code, raw)
	}
	if _, err := e.db.Claim(context.Background(), "ota", "msg_slow"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("claimed: %v", err)
	}
	after := e.counts(t)
	if after.Rejected != before.Rejected+1 || after.Accepted != before.Accepted {
		t.Fatalf("stored %+v -> %+v", before, after)
	}
	// The error's own text would name the connection's addresses.
	if code != http.StatusRequestTimeout || strings.Contains(raw, "127.0.0.1") {
		t.Fatalf("a timed-out body answers %d %s; want 408 without internal detail", code, raw)
	}
}

// TestHostile_UnauthenticatedHeaders: what an unauthenticated sender can make us store
// is bounded; otherwise a 404 or 401 flood would store up to net/http's 1 MiB of headers
// per request and fill the disk at line rate.
func TestHostile_UnauthenticatedHeaders(t *testing.T) {
	e := newHostileEnv(t, nil)
	code, a, _ := e.post(t, "nope", "", `{}`, func(r *http.Request) {
		for i := range 90 {
			r.Header.Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("v", 10000))
		}
	})
	if code != 404 || a.Error == "" {
		t.Fatalf("got %d %+v", code, a)
	}
	d := e.lastDelivery(t)
	raw, _ := json.Marshal(d.Headers)
	if len(raw) > 64<<10 {
		t.Fatalf("an unauthenticated rejection stored %d bytes of headers; want a bound", len(raw))
	}
}

// TestHostile_LockedBurst: a burst of deliveries while another process holds the write
// lock. Each must be answered 503 (never 200: nothing was stored), and promptly: a
// provider gives up on a slow answer, and the writer should not spend busy_timeout per
// delivery before it sees the next ones.
func TestHostile_LockedBurst(t *testing.T) {
	const busy = 200 * time.Millisecond
	e := newEnv(t, sqlite.Options{BusyTimeout: busy})
	other, err := sql.Open("sqlite3", "file:"+e.db.Path()+"?_busy_timeout=100")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var slowest time.Duration
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			code, _, _ := e.post(t, "ota", fmt.Sprintf("msg_burst_%d", i), cancellation, nil)
			mu.Lock()
			codes[code]++
			slowest = max(slowest, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	conn.ExecContext(context.Background(), "ROLLBACK")
	if codes[503] != n {
		t.Fatalf("answers under the lock: %v, want %d × 503", codes, n)
	}
	if c := e.counts(t); c.Accepted != 0 {
		t.Fatalf("stored %+v under the lock", c)
	}
	t.Logf("%d deliveries under a held lock (busy_timeout %s): all 503, the slowest after %s", n, busy, slowest.Round(time.Millisecond))
	// Retrying a failed batch one request at a time would make the k-th wait busy_timeout
	// k+1 times.
	if slowest > 5*busy {
		t.Fatalf("the slowest 503 came after %s, %d × busy_timeout", slowest.Round(time.Millisecond), slowest/busy)
	}
}

// TestHostile_UnauthenticatedReasonBounded: a batch is parsed before its items'
// signatures are checked, and the parse error quotes what it found; a stranger's member
// name quoted whole would be stored, answered and logged at up to the body's size.
func TestHostile_UnauthenticatedReasonBounded(t *testing.T) {
	db := storagetest.Open(t)
	var logged bytes.Buffer
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{adyenSource(t)}, Store: db, MaxBody: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	srv := serveReceiver(t, rc, nil)
	name := strings.Repeat("A", 200_000)
	resp, err := http.Post(srv.URL+"/webhooks/adyen", "application/json", strings.NewReader(`{"`+name+`":1,"`+name+`":2}`))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || len(answer) > 512 || !strings.Contains(string(answer), "…") {
		t.Errorf("answer %d, %d bytes: %.200s", resp.StatusCode, len(answer), answer)
	}
	page, err := db.Deliveries(context.Background(), storage.DeliveryFilter{Source: "adyen", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Deliveries) != 1 {
		t.Fatalf("stored %d deliveries", len(page.Deliveries))
	}
	if e := page.Deliveries[0].Error; len(e) > 320 || !utf8.ValidString(e) || !strings.Contains(e, "AAAA") {
		t.Errorf("stored error of %d bytes: %.200s", len(e), e)
	}
	if logged.Len() > 4096 {
		t.Errorf("logged %d bytes", logged.Len())
	}
}
