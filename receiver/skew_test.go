package receiver_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestReceiver_ClockSkew: deliveries signed two minutes ahead of this machine's clock
// are accepted, and both the metric and ClockSkew say so; one refused for being ten
// minutes off is counted too, a forged one is not, whatever its timestamp, and an hour
// later the window is empty again.
func TestReceiver_ClockSkew(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1767225600, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stripe, err := signature.New(signature.Config{Scheme: "stripe", Secrets: []string{"whsec_pay"}})
	if err != nil {
		t.Fatal(err)
	}
	forger, err := signature.New(signature.Config{Scheme: "stripe", Secrets: []string{"whsec_not_the_secret"}})
	if err != nil {
		t.Fatal(err)
	}
	ota := otaSource(t)
	pay := receiver.Source{Name: "pay", Verifier: stripe, Keys: receiver.KeySpec{EventID: []string{"/id"}}, TTL: time.Hour}
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{ota, pay}, Store: db, Now: clock})
	mux := http.NewServeMux()
	rc.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(source string, v signature.Verifier, id string, signed time.Duration) int {
		t.Helper()
		body := fmt.Sprintf(`{"id":%q,"property_id":"P-1","booking_id":%q,"status":"confirmed"}`, id, id)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/"+source, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		if err := v.Sign(req.Header, url.Values{}, []byte(body), clock().Add(signed)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	metrics := func() string {
		t.Helper()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	hasLine := func(text, line string) bool {
		for l := range strings.Lines(text) {
			if strings.TrimSpace(l) == line {
				return true
			}
		}
		return false
	}

	for i := range 5 {
		if code := send("ota", ota.Verifier, fmt.Sprintf("msg_%d", i), 2*time.Minute); code != http.StatusOK {
			t.Fatalf("ota delivery signed 2 min ahead: %d", code)
		}
	}
	for i := range 2 {
		if code := send("pay", stripe, fmt.Sprintf("evt_%d", i), 2*time.Minute); code != http.StatusOK {
			t.Fatalf("pay delivery signed 2 min ahead: %d", code)
		}
	}
	if median, n := rc.ClockSkew(); median != 2*time.Minute || n != 7 {
		t.Fatalf("ClockSkew = %v, %d; want 2m0s over 7 deliveries", median, n)
	}
	m := metrics()
	for _, line := range []string{
		`hookdedup_signature_skew_seconds_count{source="ota"} 5`,
		`hookdedup_signature_skew_seconds_sum{source="ota"} 600`,
		`hookdedup_signature_skew_seconds_bucket{source="ota",le="60"} 0`,
		`hookdedup_signature_skew_seconds_bucket{source="ota",le="120"} 5`,
		`hookdedup_signature_skew_seconds_count{source="pay"} 2`,
	} {
		if !hasLine(m, line) {
			t.Errorf("/metrics has no line %q", line)
		}
	}

	// Refused for its time alone: observed. Forged, on time or not: not observed.
	if code := send("pay", stripe, "evt_late", -10*time.Minute); code != http.StatusUnauthorized {
		t.Fatalf("a delivery signed 10 min behind: %d, want 401", code)
	}
	for _, off := range []time.Duration{0, 10 * time.Minute} {
		if code := send("pay", forger, "evt_forged", off); code != http.StatusUnauthorized {
			t.Fatalf("a forged delivery %v off: %d, want 401", off, code)
		}
	}
	m = metrics()
	for _, line := range []string{
		`hookdedup_signature_skew_seconds_count{source="pay"} 3`,
		`hookdedup_signature_skew_seconds_sum{source="pay"} -360`,
		`hookdedup_signature_skew_seconds_bucket{source="pay",le="-300"} 1`,
	} {
		if !hasLine(m, line) {
			t.Errorf("/metrics has no line %q", line)
		}
	}
	if median, n := rc.ClockSkew(); median != 2*time.Minute || n != 8 {
		t.Fatalf("ClockSkew after a late and a forged delivery = %v, %d; want 2m0s over 8", median, n)
	}

	// The window is the last hour.
	mu.Lock()
	now = now.Add(30 * time.Minute)
	mu.Unlock()
	for i := range 9 {
		if code := send("ota", ota.Verifier, fmt.Sprintf("msg_b%d", i), -90*time.Second); code != http.StatusOK {
			t.Fatalf("ota delivery signed 90 s behind: %d", code)
		}
	}
	if median, n := rc.ClockSkew(); median != -90*time.Second || n != 17 {
		t.Fatalf("ClockSkew half an hour on = %v, %d; want -1m30s (9 of 17) over 17", median, n)
	}
	mu.Lock()
	now = now.Add(31 * time.Minute)
	mu.Unlock()
	if median, n := rc.ClockSkew(); median != -90*time.Second || n != 9 {
		t.Fatalf("ClockSkew an hour after the first = %v, %d; want -1m30s over the 9 of the last hour", median, n)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if median, n := rc.ClockSkew(); median != 0 || n != 0 {
		t.Fatalf("ClockSkew two hours on = %v, %d; want nothing", median, n)
	}
}

// TestReceiver_ClockSkewBounded: a busy minute keeps a bounded sample of its skews,
// and the median over it still tells the skew most deliveries had.
func TestReceiver_ClockSkewBounded(t *testing.T) {
	now := time.Unix(1767225600, 0)
	rc, send := otaAt(t, now)
	for i := range 400 {
		signed := now.Add(3 * time.Minute)
		if i%10 == 0 {
			signed = now // a tenth of the senders are right
		}
		if w := send(i, signed); w.Code != http.StatusOK {
			t.Fatalf("delivery %d: %d %s", i, w.Code, w.Body)
		}
	}
	if median, n := rc.ClockSkew(); median != 3*time.Minute || n != 400 {
		t.Fatalf("ClockSkew = %v, %d; want 3m0s over 400", median, n)
	}
}

// otaAt serves otaSource on a database of its own, its clock stopped at now, and
// returns the receiver and what sends it the i-th booking's delivery signed at signed.
func otaAt(t *testing.T, now time.Time) (*receiver.Receiver, func(i int, signed time.Time) *httptest.ResponseRecorder) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ota := otaSource(t)
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{ota}, Store: db, Now: func() time.Time { return now }})
	h := http.NewServeMux()
	rc.Register(h)
	return rc, func(i int, signed time.Time) *httptest.ResponseRecorder {
		t.Helper()
		body := fmt.Sprintf(`{"property_id":"P-1","booking_id":"B-%d","status":"confirmed"}`, i)
		req := httptest.NewRequest(http.MethodPost, "/webhooks/ota", strings.NewReader(body))
		req.Header.Set("webhook-id", fmt.Sprintf("msg_%d", i))
		if err := ota.Verifier.Sign(req.Header, url.Values{}, []byte(body), signed); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
}

// TestReceiver_ClockSkewBatch: a batched source whose scheme is timestamped records
// the skew of its requests as a single delivery's source does.
func TestReceiver_ClockSkewBatch(t *testing.T) {
	now := time.Unix(1767225600, 0)
	clock := func() time.Time { return now }
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stripe, err := signature.New(signature.Config{Scheme: "stripe", Secrets: []string{"whsec_pay"}})
	if err != nil {
		t.Fatal(err)
	}
	src := receiver.Source{Name: "pay", Verifier: stripe, Keys: receiver.KeySpec{EventID: []string{"/id"}},
		TTL: time.Hour, Batch: "/events"}
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, Now: clock})
	mux := http.NewServeMux()
	rc.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body := `{"events":[{"id":"evt_1"},{"id":"evt_2"}]}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/pay", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := stripe.Sign(req.Header, url.Values{}, []byte(body), now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	if median, n := rc.ClockSkew(); n != 1 || median != 2*time.Minute {
		t.Errorf("ClockSkew = %v over %d, want 2m0s over 1 request", median, n)
	}
}

// TestReceiver_ClockSkewReplays: replays of a captured delivery, refused as too old
// though its signature matches, do not make a correct clock look off: a signed message
// counts once however often it arrives. A clock really off shows all the same, in every
// source's deliveries, and another source's few deliveries in time do not hide it.
func TestReceiver_ClockSkewReplays(t *testing.T) {
	ota := otaSource(t)
	stripe, err := signature.New(signature.Config{Scheme: "stripe", Secrets: []string{"whsec_pay"}})
	if err != nil {
		t.Fatal(err)
	}
	pay := receiver.Source{Name: "pay", Verifier: stripe, Keys: receiver.KeySpec{EventID: []string{"/id"}}, TTL: time.Hour}
	sources := []receiver.Source{ota, pay}
	// start serves sources on a receiver whose clock is off by off.
	start := func(t *testing.T, off time.Duration) (*receiver.Receiver, func(src receiver.Source, id string, signed time.Time) int) {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		rc := receiver.New(receiver.Config{Sources: sources, Store: db, Now: func() time.Time { return time.Now().Add(off) }})
		srv := serveReceiver(t, rc, nil)
		return rc, func(src receiver.Source, id string, signed time.Time) int {
			t.Helper()
			body := fmt.Sprintf(`{"id":%q,"property_id":"P-1","booking_id":%q,"status":"cancelled"}`, id, id)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/"+src.Name, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("webhook-id", id)
			if err := src.Verifier.Sign(req.Header, url.Values{}, []byte(body), signed); err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
	}
	near := func(got, want time.Duration) bool { return (got - want).Abs() < time.Minute }

	t.Run("OneDeliveryReplayed", func(t *testing.T) {
		rc, send := start(t, 0)
		for i := range 10 {
			if code := send(ota, fmt.Sprintf("evt_live_%d", i), time.Now()); code != http.StatusOK {
				t.Fatalf("genuine delivery: %d", code)
			}
		}
		captured := time.Now().Add(-2 * time.Hour)
		for range 30 {
			if code := send(ota, "evt_captured", captured); code != http.StatusUnauthorized {
				t.Fatalf("replay of a two-hour-old delivery: %d, want 401", code)
			}
		}
		if median, n := rc.ClockSkew(); !near(median, 0) || n != 11 {
			t.Errorf("ClockSkew() = %v over %d; want about 0 over 11: ten deliveries in time, and one captured "+
				"delivery however often replayed", median, n)
		}
	})

	t.Run("OneSourceInTimeHidesNoSkew", func(t *testing.T) {
		// This machine's clock ten minutes behind: fifty deliveries of a busy source,
		// signed by its provider's right clock, show it; one delivery of another source
		// signed by a clock as wrong as this one's shows none.
		const off = -10 * time.Minute
		rc, send := start(t, off)
		for i := range 50 {
			send(ota, fmt.Sprintf("evt_ota_%d", i), time.Now())
		}
		send(pay, "evt_pay_1", time.Now().Add(off))
		if median, n := rc.ClockSkew(); !near(median, -off) || n != 51 {
			t.Errorf("ClockSkew() = %v over %d; want about %v over 51, which 50 of them show", median, n, -off)
		}
	})

	t.Run("ClockOff", func(t *testing.T) {
		rc, send := start(t, 0)
		// This machine's clock two hours ahead: every sender's deliveries look two hours
		// old, and are refused.
		for i := range 5 {
			for _, src := range sources {
				if code := send(src, fmt.Sprintf("evt_%d", i), time.Now().Add(-2*time.Hour)); code != http.StatusUnauthorized {
					t.Fatalf("%s delivery signed two hours behind: %d, want 401", src.Name, code)
				}
			}
		}
		if median, n := rc.ClockSkew(); !near(median, -2*time.Hour) || n != 10 {
			t.Errorf("ClockSkew() = %v over %d; want about -2h0m0s over 10: every source shows it", median, n)
		}
	})
}
