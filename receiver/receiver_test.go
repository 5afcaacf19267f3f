package receiver_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// testEnv is a receiver on a real database behind a real HTTP server.
type testEnv struct {
	db  *sqlite.DB
	srv *httptest.Server
	src receiver.Source
}

func otaSource(t testing.TB) receiver.Source {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "standard-webhooks", Secrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	return receiver.Source{
		Name:     "ota",
		Verifier: v,
		Keys:     receiver.KeySpec{EventID: []string{"header:webhook-id"}, KeyFields: []string{"/property_id", "/booking_id", "/status"}},
		TTL:      24 * time.Hour,

		PropertyField: "/property_id", BookingField: "/booking_id", StatusField: "/status", AmountField: []string{"/refund/amount"},
	}
}

func newEnv(t testing.TB, opt sqlite.Options, sources ...receiver.Source) *testEnv {
	t.Helper()
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), opt)
	if len(sources) == 0 {
		sources = []receiver.Source{otaSource(t)}
	}
	srv := serveReceiver(t, receiver.New(receiver.Config{Sources: sources, Store: db, MaxBody: 4096}), nil)
	return &testEnv{db: db, srv: srv, src: sources[0]}
}

// serveReceiver serves rc's routes on a real HTTP server until the test ends (closed
// before the database, which was opened first); srvConfig, if not nil, tunes the server
// before it starts.
func serveReceiver(t testing.TB, rc *receiver.Receiver, srvConfig func(*http.Server)) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	rc.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	if srvConfig != nil {
		srvConfig(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	Status        string `json:"status"`
	Key           string `json:"key"`
	Delivery      string `json:"delivery"`
	FirstDelivery string `json:"first_delivery"`
	Error         string `json:"error"`
}

// post sends body to source, signed by src when id is not "" (the webhook-id).
func (e *testEnv) post(t testing.TB, source, id string, body string, mutate func(*http.Request)) (int, answer, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/webhooks/"+source, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set("webhook-id", id)
		if err := e.src.Verifier.Sign(req.Header, url.Values{}, []byte(body), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if mutate != nil {
		mutate(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return resp.StatusCode, a, resp.Header
}

const cancellation = `{"property_id":"HTL-LIS-01","booking_id":"BK-1042","status":"cancelled","refund":{"amount":182.5}}`

// TestHandler_LoneSurrogate: a signed delivery whose text was cut in the middle of an
// emoji by its sender's serialiser (an escaped lone surrogate, which RFC 8259 allows) is
// accepted and stored byte for byte, and its redelivery is a duplicate of it, not a 400
// its sender would retry until it gave up. Another text cut elsewhere is another
// payload: a mismatch, not the same one read as U+FFFD.
func TestHandler_LoneSurrogate(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	ctx := context.Background()
	body := `{"property_id":"HTL-LIS-01","booking_id":"BK-1042","status":"message","text":"Merci \ud83d"}`
	code, a, _ := e.post(t, "ota", "msg_lone_surrogate", body, nil)
	if code != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("a signed delivery with an escaped lone surrogate: %d %+v, want accepted", code, a)
	}
	id, _ := strconv.ParseInt(a.Delivery, 10, 64)
	if d, err := e.db.Delivery(ctx, id); err != nil || string(d.Body) != body {
		t.Fatalf("stored body %q, %v; want the body as sent", d.Body, err)
	}
	if code, a, _ := e.post(t, "ota", "msg_lone_surrogate", body, nil); code != http.StatusOK || a.Status != "duplicate" {
		t.Fatalf("its redelivery: %d %+v, want a duplicate", code, a)
	}
	for _, other := range []string{`Merci \ud83e`, `Merci \ufffd`} {
		code, a, _ := e.post(t, "ota", "msg_lone_surrogate", strings.Replace(body, `Merci \ud83d`, other, 1), nil)
		if code != http.StatusOK || a.Status != "duplicate" {
			t.Fatalf("%s under the same id: %d %+v, want a duplicate", other, code, a)
		}
		id, _ := strconv.ParseInt(a.Delivery, 10, 64)
		if d, err := e.db.Delivery(ctx, id); err != nil || !d.Mismatch {
			t.Errorf("%s under the same id: mismatch %v (%v), want its payload told apart", other, d.Mismatch, err)
		}
	}
}

// TestHandler_LoneSurrogateBesideAnotherFault: a delivery whose id holds a lone
// surrogate and whose body a number beyond float64 is refused 400, never answered a
// duplicate of the event whose id holds U+FFFD there.
func TestHandler_LoneSurrogateBesideAnotherFault(t *testing.T) {
	v, err := signature.New(signature.Config{Scheme: "none"})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "plain", Verifier: v, TTL: time.Hour, Keys: receiver.KeySpec{EventID: []string{"/id"}}}
	e := newEnv(t, sqlite.Options{}, src)
	if code, a, _ := e.post(t, "plain", "", `{"id":"evt_\ufffd","amount":1}`, nil); code != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("first event: %d %+v", code, a)
	}
	code, a, _ := e.post(t, "plain", "", `{"id":"evt_\ud83d","amount":1e400}`, nil)
	if code != http.StatusBadRequest {
		t.Errorf("event with 1e400 and a lone surrogate: %d %+v, want 400", code, a)
	}
}

func TestHandler_Contract(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	ctx := context.Background()

	code, a, _ := e.post(t, "ota", "msg_1", cancellation, nil)
	if code != 200 || a.Status != "accepted" || a.Key != "msg_1" || a.Delivery == "" || a.FirstDelivery != "" {
		t.Fatalf("first: %d %+v", code, a)
	}
	// Same event, other spelling: still a duplicate, and not a mismatch.
	respelled := `{ "status":"cancelled", "booking_id":"BK-1042","property_id":"HTL-LIS-01","refund":{"amount":182.50} }`
	code, d, _ := e.post(t, "ota", "msg_1", respelled, nil)
	if code != 200 || d.Status != "duplicate" || d.Key != "msg_1" || d.FirstDelivery != a.Delivery || d.Delivery == a.Delivery {
		t.Fatalf("duplicate: %d %+v", code, d)
	}
	code, m, _ := e.post(t, "ota", "msg_1", strings.Replace(cancellation, "182.5", "192.5", 1), nil)
	if code != 200 || m.Status != "duplicate" {
		t.Fatalf("changed duplicate: %d %+v", code, m)
	}
	var id int64
	fmt.Sscan(m.Delivery, &id)
	stored, err := e.db.Delivery(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.Mismatch || stored.Outcome != storage.Duplicate || http.Header(stored.Headers).Get("Webhook-Id") != "msg_1" {
		t.Fatalf("stored changed duplicate = %+v, want a mismatch with its headers", stored)
	}
	if stored.Property != "HTL-LIS-01" || stored.Booking != "BK-1042" || stored.EventStatus != "cancelled" || stored.Amount != "192.5" {
		t.Fatalf("labels = %q %q %q %q", stored.Property, stored.Booking, stored.EventStatus, stored.Amount)
	}
	// Each is stored with the status it was answered.
	for _, del := range []string{a.Delivery, m.Delivery} {
		fmt.Sscan(del, &id)
		if s, err := e.db.Delivery(ctx, id); err != nil || s.Status != http.StatusOK {
			t.Fatalf("delivery %s stored with status %d (%v), want the 200 it was answered", del, s.Status, err)
		}
	}
	fmt.Sscan(d.Delivery, &id)
	if stored, _ := e.db.Delivery(ctx, id); stored.Mismatch {
		t.Fatal("a respelled payload was flagged as a mismatch")
	}

	rejections := []struct {
		name, source, id, body string
		mutate                 func(*http.Request)
		code                   int
		errHas                 string
	}{
		{"UnknownSource", "nope", "", "{}", nil, 404, `unknown source "nope"`},
		{"TooLarge", "ota", "msg_big", `{"pad":"` + strings.Repeat("x", 5000) + `"}`, nil, 413, "larger than the limit of 4096 bytes"},
		{"Unsigned", "ota", "", cancellation, nil, 401, "webhook-id"},
		{"TamperedBody", "ota", "msg_3", cancellation, func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(cancellation, "182.5", "1825", 1)))
			r.ContentLength = -1
		}, 401, "signature"},
		{"StaleTimestamp", "ota", "msg_4", cancellation, func(r *http.Request) {
			old := time.Now().Add(-10 * time.Minute)
			r.Header.Del("webhook-signature")
			otaSource(t).Verifier.Sign(r.Header, url.Values{}, []byte(cancellation), old)
		}, 401, ""},
		{"NotJSON", "ota", "msg_5", `booking=BK-1042`, nil, 400, "JSON"},
	}
	for _, tc := range rejections {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := storagetest.CountDeliveries(ctx, e.db, "")
			code, a, _ := e.post(t, tc.source, tc.id, tc.body, tc.mutate)
			if code != tc.code || a.Error == "" || !strings.Contains(a.Error, tc.errHas) || a.Status != "" {
				t.Fatalf("got %d %+v, want %d with an error naming %q", code, a, tc.code, tc.errHas)
			}
			after, _ := storagetest.CountDeliveries(ctx, e.db, "")
			if after.Rejected != before.Rejected+1 || after.Accepted != before.Accepted {
				t.Fatalf("counts %+v -> %+v, want one more rejected", before, after)
			}
		})
	}
}

func TestHandler_NoKey(t *testing.T) {
	// A source with no event id at all, keyed on fields: a body without them is 422.
	src := otaSource(t)
	src.Keys = receiver.KeySpec{KeyFields: []string{"/booking_id", "/status"}}
	e := newEnv(t, sqlite.Options{}, src)
	code, a, _ := e.post(t, "ota", "msg_1", `{"note":"nothing to key on"}`, nil)
	if code != 422 || !strings.Contains(a.Error, "key") {
		t.Fatalf("got %d %+v, want 422", code, a)
	}
	code, a, _ = e.post(t, "ota", "msg_1", `{"booking_id":"BK-1","status":"cancelled"}`, nil)
	if code != 200 || !strings.HasPrefix(a.Key, "derived:") {
		t.Fatalf("got %d %+v, want a derived key", code, a)
	}
	// The rejected delivery passed the signature check, so its body is kept for a look.
	c, _ := storagetest.CountDeliveries(context.Background(), e.db, "ota")
	if c.Rejected != 1 {
		t.Fatalf("rejected = %d, want 1", c.Rejected)
	}
	first, err := e.db.Delivery(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != 422 || string(first.Body) != `{"note":"nothing to key on"}` {
		t.Fatalf("stored rejection = %+v", first)
	}
}

func TestHandler_UnauthenticatedBodyNotKept(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	code, _, _ := e.post(t, "ota", "", `{"spam":"x"}`, nil)
	if code != 401 {
		t.Fatalf("code = %d", code)
	}
	d, err := e.db.Delivery(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != storage.Rejected || len(d.Body) != 0 {
		t.Fatalf("stored = %+v, want a rejection without body", d)
	}
}

// pmsTokenSource is a source "pms" checked by the token "s3cret-token" in the header
// X-Webhook-Token, which is redacted where headers are stored.
func pmsTokenSource(t *testing.T) receiver.Source {
	t.Helper()
	v, err := signature.New(signature.Config{Scheme: "token", Secrets: []string{"s3cret-token"}, TokenHeader: "X-Webhook-Token"})
	if err != nil {
		t.Fatal(err)
	}
	return receiver.Source{Name: "pms", Verifier: v, Keys: receiver.KeySpec{EventID: []string{"/id"}}, TTL: time.Hour,
		RedactHeaders: []string{"X-Webhook-Token"}}
}

func TestHandler_CredentialsRedacted(t *testing.T) {
	src := pmsTokenSource(t)
	e := newEnv(t, sqlite.Options{}, src)
	code, a, _ := e.post(t, "pms", "", `{"id":"e1"}`, func(r *http.Request) {
		r.Header.Set("X-Webhook-Token", "s3cret-token")
		r.Header.Set("Authorization", "Bearer other-secret")
	})
	if code != 200 {
		t.Fatalf("got %d %+v", code, a)
	}
	d, err := e.db.Delivery(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(d.Headers)
	if bytes.Contains(raw, []byte("s3cret")) || bytes.Contains(raw, []byte("other-secret")) {
		t.Fatalf("stored headers carry a credential: %s", raw)
	}
}

func TestHandler_Concurrent(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			code, a, _ := e.post(t, "ota", "msg_race", cancellation, nil)
			mu.Lock()
			got[fmt.Sprintf("%d %s", code, a.Status)]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if got["200 accepted"] != 1 || got["200 duplicate"] != n-1 || len(got) != 2 {
		t.Fatalf("answers = %v, want 1 accepted and %d duplicates, all 200", got, n-1)
	}
	all, err := e.db.KeyDeliveries(context.Background(), "ota", "msg_race")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("stored %d deliveries, want %d", len(all), n)
	}
}

// TestHandler_DatabaseLocked holds the database's write lock from another connection, as
// another process would: intake must answer 503, never 200, and recover by itself.
func TestHandler_DatabaseLocked(t *testing.T) {
	t.Parallel() // waits on timers and locks of its own, with no tight time bound
	e := newEnv(t, sqlite.Options{BusyTimeout: 200 * time.Millisecond})
	release := holdWriteLock(t, e.db.Path(), "BEGIN EXCLUSIVE")
	code, a, h := e.post(t, "ota", "msg_locked", cancellation, nil)
	if code != 503 || a.Status != "" || a.Error == "" || h.Get("Retry-After") == "" {
		t.Fatalf("locked: %d %+v Retry-After %q; want 503 with Retry-After", code, a, h.Get("Retry-After"))
	}
	resp, err := http.Get(e.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("readyz while locked = %d, want 503", resp.StatusCode)
	}
	release()
	code, a, _ = e.post(t, "ota", "msg_locked", cancellation, nil)
	if code != 200 || a.Status != "accepted" {
		t.Fatalf("after the lock: %d %+v, want accepted (nothing was stored before)", code, a)
	}
}

func TestHandler_Probes(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	e.post(t, "ota", "msg_1", cancellation, nil)
	e.post(t, "ota", "msg_1", cancellation, nil)
	for path, want := range map[string]string{
		"/healthz": `"ok"`,
		"/readyz":  `"ready"`,
		"/metrics": `hookdedup_deliveries_total{outcome="duplicate",source="ota"} 1`,
	} {
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s = %d %q, want %q", path, resp.StatusCode, body, want)
		}
	}
}

// TestHandler_WrongMethod: any method but POST on a webhook path is answered 405 with
// Allow: POST and a JSON error, as every intake answer is JSON, even on a mux whose
// catch-all serves the console's HTML pages; and nothing is stored.
// TestHandler_ContentEncoding: a compressed body is refused with an answer that names its
// coding, before its signature (made over the JSON, it would not match) or its parse is
// tried; identity is no coding.
func TestHandler_ContentEncoding(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(cancellation))
	zw.Close()
	for _, tc := range []struct {
		name, coding, body string
		code               int
		want               string
	}{
		{"Gzip", "gzip", gz.String(), http.StatusUnsupportedMediaType, `Content-Encoding "gzip" is not supported: send the body uncompressed`},
		{"GzipLabelOnPlainJSON", "gzip", cancellation, http.StatusUnsupportedMediaType, `Content-Encoding "gzip" is not supported`},
		{"Listed", "identity, br", cancellation, http.StatusUnsupportedMediaType, `Content-Encoding "identity, br" is not supported`},
		{"Identity", "identity", cancellation, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, a, _ := e.post(t, "ota", "evt_"+tc.name, tc.body, func(r *http.Request) { r.Header.Set("Content-Encoding", tc.coding) })
			if code != tc.code || !strings.Contains(a.Error, tc.want) {
				t.Errorf("%d %q, want %d %q", code, a.Error, tc.code, tc.want)
			}
		})
	}
	if c := e.counts(t); c.Accepted != 1 {
		t.Errorf("stored %+v; want the identity delivery alone accepted", c)
	}
}

func TestHandler_WrongMethod(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	mux := http.NewServeMux()
	receiver.New(receiver.Config{Sources: []receiver.Source{e.src}, Store: e.db}).Register(mux)
	// The console's catch-all, as serve mounts it beside the receiver.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<!doctype html><title>Not found</title>")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, http.MethodHead} {
		for _, source := range []string{"ota", "nope"} {
			req, _ := http.NewRequest(method, srv.URL+"/webhooks/"+source, strings.NewReader(cancellation))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var a answer
			jsonErr := json.Unmarshal(raw, &a)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" ||
				resp.Header.Get("Content-Type") != "application/json" ||
				(method != http.MethodHead && (jsonErr != nil || !strings.Contains(a.Error, "POST"))) {
				t.Errorf("%s /webhooks/%s: %d Allow %q Content-Type %q %q; want 405, Allow: POST and a JSON error",
					method, source, resp.StatusCode, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"), raw)
			}
		}
	}
	if c := e.counts(t); c != (storagetest.Counts{}) {
		t.Fatalf("stored %+v for requests with the wrong method", c)
	}
}

// TestHandler_UnknownSourceNameUTF8: an unknown source's name is stored, answered and
// counted as valid UTF-8: cut to its bound on a character boundary, and with invalid
// bytes replaced by U+FFFD.
func TestHandler_UnknownSourceNameUTF8(t *testing.T) {
	e := newHostileEnv(t, nil)
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{e.src}, Store: e.db})
	mux := http.NewServeMux()
	rc.Register(mux)
	for _, tc := range []struct{ path, want string }{
		{strings.Repeat("a", 63) + "%C3%A9", strings.Repeat("a", 63)},             // é would straddle byte 64
		{strings.Repeat("%E2%82%AC", 30), strings.Repeat("€", 21)},                // 90 bytes: 21 whole euros fit in 64
		{"%FF%FEota", "\uFFFDota"},                                                // not UTF-8 at all
		{"ok%C3", "ok\uFFFD"},                                                     // a character cut short
		{strings.Repeat("b", 62) + "%F0%9F%98%80", strings.Repeat("b", 62)},       // a 4-byte emoji over the bound
		{"%ED%A0%80x", "\uFFFDx"},                                                 // a UTF-16 surrogate, invalid in UTF-8
		{strings.Repeat("c", 64) + "%FF%FF", strings.Repeat("c", 64)},             // invalid bytes past the bound
		{"%F0%9F%98%80" + strings.Repeat("d", 60), "😀" + strings.Repeat("d", 60)}, // exactly 64 bytes: kept whole
	} {
		code, a, _ := e.post(t, tc.path, "", `{}`, nil)
		d := e.lastDelivery(t)
		if code != 404 || !utf8.ValidString(d.Source) || d.Source != tc.want || !utf8.ValidString(a.Error) ||
			!strings.Contains(a.Error, tc.want) {
			t.Errorf("%s: %d %q, stored as %q (%d bytes); want 404 and %q", tc.path, code, a.Error, d.Source, len(d.Source), tc.want)
		}
	}
	// Past the sample bounds the name is counted, not stored: the count's name too.
	for i := range 2 * receiver.DefaultRejectionsPerAddress {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/"+strings.Repeat("a", 63)+"%C3%A9", strings.NewReader(`{}`))
		req.RemoteAddr = fmt.Sprintf("192.0.2.7:%d", i+1)
		mux.ServeHTTP(httptest.NewRecorder(), req)
	}
	if err := rc.FlushRejections(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, err := e.db.RejectionsNotStored(context.Background(), storage.DeliveryFilter{Source: strings.Repeat("a", 63)})
	if err != nil || n != receiver.DefaultRejectionsPerAddress {
		t.Fatalf("counted under the cut name: %d %v, want %d", n, err, receiver.DefaultRejectionsPerAddress)
	}
}

// TestHandler_PathWithoutSource: a path under /webhooks that names no source
// (/webhooks/, a source's name with a slash after it, deeper paths) is answered as an
// unknown source is: 404 with a JSON error, even on a mux whose catch-all serves the
// console's HTML pages; and a POST is recorded as a rejection, so that a provider's
// misconfigured URL shows on the console.
func TestHandler_PathWithoutSource(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	mux := http.NewServeMux()
	receiver.New(receiver.Config{Sources: []receiver.Source{e.src}, Store: e.db}).Register(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<!doctype html><title>Not found</title>")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	posts := 0
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		for _, path := range []string{"/webhooks/ota/", "/webhooks/", "/webhooks", "/webhooks/ota/extra"} {
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(cancellation))
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var a answer
			if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" ||
				json.Unmarshal(raw, &a) != nil || !strings.Contains(a.Error, "unknown source") {
				t.Errorf("%s %s: %d %q %q; want 404 and a JSON error naming an unknown source",
					method, path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			}
			if method == http.MethodPost {
				posts++
			}
		}
	}
	if c := e.counts(t); c.Rejected != int64(posts) || c.Accepted != 0 {
		t.Fatalf("stored %+v; want the %d POSTs as rejections", c, posts)
	}
}

// A token header sent twice, the first time empty, fails the check (which reads the
// first value) and is stored as a rejection sample: the second value may be the token
// itself and must not reach storage.
func TestHandler_CredentialsRedactedBehindEmptyValue(t *testing.T) {
	src := pmsTokenSource(t)
	e := newEnv(t, sqlite.Options{}, src)
	code, a, _ := e.post(t, "pms", "", `{"id":"e1"}`, func(r *http.Request) {
		r.Header["X-Webhook-Token"] = []string{"", "s3cret-token"}
	})
	if code != 401 {
		t.Fatalf("got %d %+v, want 401", code, a)
	}
	d, err := e.db.Delivery(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(d.Headers)
	if bytes.Contains(raw, []byte("s3cret")) {
		t.Fatalf("stored headers carry the token: %s", raw)
	}
}

// Two bookings whose numeric ids differ only past 2^53 (64-bit ids, as some systems
// send) are two events: keyed on the fields, the second must not come back duplicate
// of the first because both ids read as the same float64.
func TestHandler_KeyFieldsBigIntegersDistinct(t *testing.T) {
	src := otaSource(t)
	src.Keys = receiver.KeySpec{KeyFields: []string{"/property_id", "/booking_id", "/status"}}
	e := newEnv(t, sqlite.Options{}, src)
	const first = `{"property_id":"HTL-LIS-01","booking_id":9007199254740993,"status":"cancelled"}`
	const second = `{"property_id":"HTL-LIS-01","booking_id":9007199254740992,"status":"cancelled"}`
	code, a1, _ := e.post(t, "ota", "msg_1", first, nil)
	if code != 200 || a1.Status != "accepted" {
		t.Fatalf("first: %d %+v", code, a1)
	}
	code, a2, _ := e.post(t, "ota", "msg_2", second, nil)
	if code != 200 || a2.Status != "accepted" || a2.Key == a1.Key {
		t.Fatalf("second booking: %d %+v, first key %s: want accepted under its own key", code, a2, a1.Key)
	}
	// Spelling still does not change a key where the number is exact.
	code, a3, _ := e.post(t, "ota", "msg_3", `{"status":"cancelled","booking_id":9007199254740992.0,"property_id":"HTL-LIS-01"}`, nil)
	if code != 200 || a3.Status != "duplicate" || a3.Key != a2.Key {
		t.Fatalf("respelled second booking: %d %+v, want duplicate of %s", code, a3, a2.Key)
	}
	// The booking label the console filters on is the id as sent, not its float64.
	id, _ := strconv.ParseInt(a1.Delivery, 10, 64)
	d, err := e.db.Delivery(context.Background(), id)
	if err != nil || d.Booking != "9007199254740993" {
		t.Errorf("first delivery's booking label = %q (%v), want 9007199254740993", d.Booking, err)
	}
}

// A correlation rule compares bookings as sent: two bookings whose numeric ids differ
// only past 2^53 do not correlate.
func TestProbeFor_CorrelationBigIntegerBookings(t *testing.T) {
	ota := otaSource(t)
	ota.Correlations = []receiver.Correlation{{Rule: "double-refund", Window: time.Hour,
		Booking: "/booking_id", Amount: "/amount", Currency: "/currency"}}
	key := func(body string) string {
		t.Helper()
		p, err := receiver.ProbeFor(&ota, http.Header{"Webhook-Id": {"evt_1"}}, []byte(body), time.Now())
		if err != nil || len(p.Correlations) != 1 {
			t.Fatalf("probe: %+v, %v", p, err)
		}
		return p.Correlations[0].Hash
	}
	a := key(`{"booking_id":9007199254740993,"amount":"10.00","currency":"EUR"}`)
	b := key(`{"booking_id":9007199254740992,"amount":"10.00","currency":"EUR"}`)
	c := key(`{"booking_id":9007199254740992.0,"amount":"10.00","currency":"EUR"}`)
	if a == b || b != c {
		t.Errorf("correlation keys: %s, %s, %s; want the first apart, the last two one", a, b, c)
	}
}

// A business key that blocks must not block another booking whose numeric id differs
// from the first's only past 2^53.
func TestHandler_BusinessKeyBigIntegersDistinct(t *testing.T) {
	src := otaSource(t)
	src.BusinessKey = []string{"/booking_id", "/status"}
	src.BusinessKeyBlocks = true
	e := newEnv(t, sqlite.Options{}, src)
	code, a1, _ := e.post(t, "ota", "msg_1", `{"booking_id":9007199254740993,"status":"cancelled"}`, nil)
	if code != 200 || a1.Status != "accepted" {
		t.Fatalf("first: %d %+v", code, a1)
	}
	code, a2, _ := e.post(t, "ota", "msg_2", `{"booking_id":9007199254740992,"status":"cancelled"}`, nil)
	if code != 200 || a2.Status != "accepted" {
		t.Fatalf("another booking: %d %+v, want accepted", code, a2)
	}
	code, a3, _ := e.post(t, "ota", "msg_3", `{"status":"cancelled","booking_id":9007199254740992}`, nil)
	if code != 200 || a3.Status != "duplicate" {
		t.Fatalf("the same booking again: %d %+v, want duplicate", code, a3)
	}
}

// A correlation rule reads a currency only where it can be a currency code: text longer
// than any code (a pointer aimed at a description) is stored cut to 16 characters, and
// two such texts that differ past the cut must not correlate as one currency; the event
// is not read, as one without a currency is not.
func TestProbeFor_CorrelationCurrencyPastCodeLength(t *testing.T) {
	ota := otaSource(t)
	ota.Correlations = []receiver.Correlation{{Rule: "double-refund", Window: time.Hour,
		Booking: "/booking_id", Amount: "/amount", Currency: "/currency"}}
	keys := func(body string) []storage.CorrelationKey {
		t.Helper()
		p, err := receiver.ProbeFor(&ota, http.Header{"Webhook-Id": {"evt_1"}}, []byte(body), time.Now())
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		return p.Correlations
	}
	for _, currency := range []string{"refund to card ending 4242", "refund to card ending 1881"} {
		if k := keys(`{"booking_id":"BK-1042","amount":"182.50","currency":"` + currency + `"}`); len(k) != 0 {
			t.Errorf("currency %q: correlation keys %+v; want none, the text is no currency code", currency, k)
		}
	}
	a, b := keys(`{"booking_id":"BK-1042","amount":"182.50","currency":"eur"}`), keys(`{"booking_id":"BK-1042","amount":182.5,"currency":" EUR "}`)
	if len(a) != 1 || len(b) != 1 || a[0].Hash != b[0].Hash {
		t.Errorf("eur and \" EUR \": %+v, %+v; want one key each, the same", a, b)
	}
}
