package receiver_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/enginetest"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// junkEnv is the receiver with the default bounds on stored rejections, on a real
// database file, behind a real HTTP server, on a clock that stands still so that a test
// decides which minute each rejection falls in.
type junkEnv struct {
	db    *sqlite.DB
	rc    *receiver.Receiver
	mux   *http.ServeMux
	srv   *httptest.Server
	src   receiver.Source
	clock *storagetest.Clock
}

func newJunkEnv(t testing.TB, opt sqlite.Options) *junkEnv {
	t.Helper()
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), opt)
	clock := storagetest.NewClock(time.Date(2026, 3, 2, 10, 0, 1, 0, time.UTC))
	db.Now = clock.Now
	src := otaSource(t)
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: db, Now: clock.Now})
	mux := http.NewServeMux()
	rc.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &junkEnv{db: db, rc: rc, mux: mux, srv: srv, src: src, clock: clock}
}

// dbSize is the size the database's content takes: its pages, as a connection of its
// own sees them (the WAL's committed pages included), whether or not a checkpoint has
// copied them into the file yet. The WAL itself is transient and bounded apart (see
// storage's checkpointer), so a checkpoint still running on a busy machine must not
// count as growth.
func dbSize(t testing.TB, path string) int64 {
	t.Helper()
	c, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var pages, pageSize int64
	if err := c.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	return pages * pageSize
}

// junkHeaders pads a request with 15 KiB of headers.
func junkHeaders(h http.Header) {
	pad := strings.Repeat("j", 1024)
	for i := range 15 {
		h.Set(fmt.Sprintf("X-Junk-%02d", i), pad)
	}
}

// sendJunk sends n unauthenticated requests with 15 KiB of headers each from workers
// goroutines: even ones to unknown source names (each its own), odd ones to ota with a
// signature that does not match. Each must be answered 404 or 401 with a JSON error; it
// returns how many were not.
func sendJunk(t testing.TB, url string, n, workers int) int64 {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				name, want := "ota", http.StatusUnauthorized
				if i%2 == 0 {
					name, want = fmt.Sprintf("junk-%d", i), http.StatusNotFound
				}
				req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/"+name, strings.NewReader(`{"booking_id":"BK-junk","status":"cancelled"}`))
				junkHeaders(req.Header)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Webhook-Id", fmt.Sprintf("msg_junk_%d", i))
				req.Header.Set("Webhook-Timestamp", "1700000000")
				req.Header.Set("Webhook-Signature", "v1,bm90IGEgc2lnbmF0dXJlIGF0IGFsbCwganVzdCBqdW5r")
				resp, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				var a answer
				err = json.NewDecoder(resp.Body).Decode(&a)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want || err != nil || a.Error == "" {
					if bad.Add(1) <= 3 {
						t.Errorf("junk %d to %s: %d %+v (%v), want %d with an error", i, name, resp.StatusCode, a, err, want)
					}
				}
			}
		})
	}
	wg.Wait()
	return bad.Load()
}

// rejectedMetric sums hookdedup_deliveries_total{outcome="rejected"} over every source.
func rejectedMetric(t testing.TB, url string) int64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && strings.HasPrefix(name, "hookdedup_deliveries_total{") && strings.Contains(name, `outcome="rejected"`) {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sc.Text(), err)
			}
			sum += int64(v)
		}
	}
	return sum
}

// TestRejections_JunkFloodBounded: 8,000 unauthenticated requests with 15 KiB of headers
// each, half to unknown sources and half with bad signatures, grow the database by less
// than 5 MB; and every one of them is still told: stored as a sample or counted, in the
// metrics, and in the dashboard's totals.
func TestRejections_JunkFloodBounded(t *testing.T) {
	n := 8000
	if testing.Short() {
		n = 2000
	}
	const limit = 5 << 20
	e := newJunkEnv(t, sqlite.Options{})
	ctx := context.Background()
	before := dbSize(t, e.db.Path())
	start := time.Now()
	if bad := sendJunk(t, e.srv.URL, n, 8); bad > 0 {
		t.Fatalf("%d of %d junk requests not answered 404/401 with a JSON error", bad, n)
	}
	took := time.Since(start)
	if err := e.rc.FlushRejections(ctx); err != nil {
		t.Fatal(err)
	}
	growth := dbSize(t, e.db.Path()) - before
	t.Logf("%d junk requests (15 KiB of headers each) in %s: the database grew by %d bytes", n, took.Round(time.Millisecond), growth)
	if growth >= limit {
		t.Fatalf("%d junk requests grew the database by %d bytes, want under %d", n, growth, limit)
	}

	// Every rejection is accounted for: a stored sample (all from one address, within
	// one minute: the per-address bound) or a count.
	c, err := storagetest.CountDeliveries(ctx, e.db, "")
	if err != nil {
		t.Fatal(err)
	}
	counted, err := e.db.RejectionsNotStored(ctx, storage.DeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Rejected != receiver.DefaultRejectionsPerAddress || c.Rejected+counted != int64(n) {
		t.Fatalf("%d rejections stored and %d counted, want %d stored and %d in all", c.Rejected, counted,
			receiver.DefaultRejectionsPerAddress, n)
	}
	if got := rejectedMetric(t, e.srv.URL); got != int64(n) {
		t.Fatalf("hookdedup_deliveries_total counts %d rejections, want %d", got, n)
	}
	if _, err := e.db.RollupStats(ctx, 100000); err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	stats, err := e.db.DeliveryStats(ctx, now.Add(-time.Hour), now.Add(time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var dashboard int64
	for _, b := range stats {
		if b.Outcome == storage.Rejected {
			dashboard += b.Deliveries
		}
	}
	if dashboard != int64(n) {
		t.Fatalf("the dashboard's totals show %d rejections, want %d", dashboard, n)
	}
}

// junkRequest is one unauthenticated request from addr, straight to the handler.
func (e *junkEnv) junkRequest(t *testing.T, addr, source string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+source, strings.NewReader(`{}`))
	req.RemoteAddr = addr
	junkHeaders(req.Header)
	w := httptest.NewRecorder()
	e.mux.ServeHTTP(w, req)
	return w.Code
}

// worstJunkRequest sends to the handler an unauthenticated request that makes the
// largest stored sample it can: from the IPv6 address of the longest form in the /64
// numbered n, to the name (when it is not a configured source's) padded to the longest
// kept with bytes that its quoted form in the error quadruples, with a Content-Type
// over its bound and 150 headers of small values, each character of which takes six
// bytes as stored, so that the kept ones fill the headers' bound closely.
func (e *junkEnv) worstJunkRequest(t *testing.T, n int, source string) int {
	t.Helper()
	if source != "ota" {
		source += strings.Repeat("\x01", max(0, 64-len(source)))
	}
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+url.PathEscape(source), strings.NewReader(`{}`))
	req.RemoteAddr = fmt.Sprintf("[%04x:%04x:ffff:ffff:ffff:ffff:ffff:ffff]:65535", 0xf000+n>>16&0xfff, n&0xffff)
	for i := range 150 {
		req.Header.Set(fmt.Sprintf("X-Junk-%03d", i), strings.Repeat("<", 12))
	}
	req.Header.Set("Content-Type", strings.Repeat("&", 300))
	w := httptest.NewRecorder()
	e.mux.ServeHTTP(w, req)
	return w.Code
}

// storedFrom counts the stored rejections by client address (without the port).
func (e *junkEnv) storedFrom(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := e.db.EachDelivery(context.Background(), storage.DeliveryFilter{Outcome: storage.Rejected}, func(d storage.Delivery) error {
		host := d.RemoteAddr[:strings.LastIndexByte(d.RemoteAddr, ':')]
		out[host]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRejections_SampleBounds: of the unauthenticated rejections of one minute, at most
// DefaultRejectionsPerAddress per client address (an IPv6 /64, whatever the port) and
// DefaultRejectionsTotal in all are stored; the next minute starts afresh; the rest are
// counted, each name and status apart (unknown names up to a bound a minute); and the
// stored samples keep only a small part of the headers.
func TestRejections_SampleBounds(t *testing.T) {
	e := newJunkEnv(t, sqlite.Options{})
	ctx := context.Background()
	sent := 0
	send := func(addr, source string, want int) {
		t.Helper()
		if code := e.junkRequest(t, addr, source); code != want {
			t.Fatalf("%s from %s: %d, want %d", source, addr, code, want)
		}
		sent++
	}

	// One address, any port: five stored.
	for i := range 12 {
		send(fmt.Sprintf("192.0.2.1:%d", 40000+i), "ota", 401)
	}
	// One IPv6 /64, many addresses in it: five stored.
	for i := range 12 {
		send(fmt.Sprintf("[2001:db8:0:1::%x]:443", i+1), "nope", 404)
	}
	if got := e.storedFrom(t); got["192.0.2.1"] != 5 || sumValues(got) != 10 {
		t.Fatalf("stored per address: %v, want 5 from 192.0.2.1 and 5 from 2001:db8:0:1::/64", got)
	}
	// Many addresses: the total stops at twenty.
	for i := range 30 {
		send(fmt.Sprintf("198.51.100.%d:1000", i+1), "ota", 401)
	}
	c, err := storagetest.CountDeliveries(ctx, e.db, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Rejected != receiver.DefaultRejectionsTotal {
		t.Fatalf("%d rejections stored in one minute, want the total bound %d", c.Rejected, receiver.DefaultRejectionsTotal)
	}

	// A new minute: the same address is sampled again.
	e.clock.Add(time.Minute)
	send("192.0.2.1:50000", "ota", 401)
	if c2, _ := storagetest.CountDeliveries(ctx, e.db, ""); c2.Rejected != c.Rejected+1 {
		t.Fatalf("the next minute stored %d more, want 1", c2.Rejected-c.Rejected)
	}
	// Many unknown names in one minute: the first few are counted by name, the rest
	// together.
	for i := range 30 {
		send("203.0.113.9:1", fmt.Sprintf("name-%02d", i), 404)
	}

	if err := e.rc.FlushRejections(ctx); err != nil {
		t.Fatal(err)
	}
	c, _ = storagetest.CountDeliveries(ctx, e.db, "")
	counted := func(f storage.DeliveryFilter) int64 {
		t.Helper()
		n, err := e.db.RejectionsNotStored(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if all := counted(storage.DeliveryFilter{}); c.Rejected+all != int64(sent) {
		t.Fatalf("%d stored and %d counted, want %d in all", c.Rejected, all, sent)
	}
	if got := counted(storage.DeliveryFilter{Source: "ota"}); got != 12-5+30-10 {
		t.Fatalf("ota: %d counted, want %d", got, 12-5+30-10)
	}
	// 203.0.113.9 had five stored (name-00 to name-04); of the other 25, the first
	// eight names are counted by name, the rest under "".
	named := 0
	for i := range 30 {
		if counted(storage.DeliveryFilter{Source: fmt.Sprintf("name-%02d", i)}) > 0 {
			named++
		}
	}
	if named != 8 {
		t.Fatalf("%d unknown names counted by name in one minute, want 8", named)
	}
	if counted(storage.DeliveryFilter{Outcome: storage.Accepted}) != 0 || counted(storage.DeliveryFilter{Booking: "BK-1"}) != 0 {
		t.Fatal("a filter that no rejection can match counted rejections")
	}
	minute := e.clock.Now().Truncate(time.Minute)
	if got := counted(storage.DeliveryFilter{From: minute}); got != 25 {
		t.Fatalf("this minute: %d counted, want 25", got)
	}
	if got := counted(storage.DeliveryFilter{To: minute}); got != counted(storage.DeliveryFilter{})-25 {
		t.Fatalf("before this minute: %d counted", got)
	}

	// What a sample keeps of 15 KiB of headers.
	page, err := e.db.Deliveries(ctx, storage.DeliveryFilter{Outcome: storage.Rejected, Limit: 1})
	if err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("events: %v %v", page, err)
	}
	d, err := e.db.Delivery(ctx, page.Deliveries[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(d.Headers)
	if len(raw) > 1536 || http.Header(d.Headers).Get("X-Hookdedup-Truncated") == "" || len(d.Body) != 0 {
		t.Fatalf("a stored sample keeps %d bytes of headers (%s), %d of body; want at most 1.5 KiB, marked as cut, and none",
			len(raw), raw[:min(len(raw), 120)], len(d.Body))
	}
}

// TestRejections_CountsKeptWhenLocked: counts that the database cannot take (another
// process holds its write lock) stay in memory and are written by the next flush.
func TestRejections_CountsKeptWhenLocked(t *testing.T) {
	e := newJunkEnv(t, sqlite.Options{BusyTimeout: 100 * time.Millisecond})
	ctx := context.Background()
	const n = 3 * receiver.DefaultRejectionsPerAddress
	for range n {
		e.junkRequest(t, "192.0.2.1:1", "ota")
	}
	other, err := sql.Open("sqlite3", "file:"+e.db.Path()+"?_busy_timeout=100")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if err := e.rc.FlushRejections(ctx); err == nil {
		t.Fatal("counts written under another process's write lock")
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := e.rc.FlushRejections(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e.db.RejectionsNotStored(ctx, storage.DeliveryFilter{})
	if err != nil || got != n-receiver.DefaultRejectionsPerAddress {
		t.Fatalf("%d counted (%v), want %d", got, err, n-receiver.DefaultRejectionsPerAddress)
	}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestRejections_AuthenticatedAllStored: a rejection after the signature check passed
// (here a body that is not JSON) is stored every time, past the bounds on
// unauthenticated ones: the sender proved who it is.
func TestRejections_AuthenticatedAllStored(t *testing.T) {
	e := newJunkEnv(t, sqlite.Options{})
	te := &testEnv{db: e.db, srv: e.srv, src: e.src}
	const n = 3 * receiver.DefaultRejectionsTotal
	for i := range n {
		const body = "not json"
		code, a, _ := te.post(t, "ota", "", body, func(r *http.Request) {
			r.Header.Set("webhook-id", fmt.Sprintf("msg_%d", i))
			e.src.Verifier.Sign(r.Header, nil, []byte(body), e.clock.Now())
		})
		if code != 400 {
			t.Fatalf("delivery %d: %d %+v, want 400", i, code, a)
		}
	}
	c, err := storagetest.CountDeliveries(context.Background(), e.db, "ota")
	if err != nil {
		t.Fatal(err)
	}
	if c.Rejected != n {
		t.Fatalf("%d authenticated rejections stored, want all %d", c.Rejected, n)
	}
}

// TestRejections_FloodMeasured measures what a junk flood costs, and reports it (figures,
// not assertions beyond correctness: the machine is shared). Run with -v to see them.
//
// Worst case for storage: each simulated minute, HOOKDEDUP_JUNK_PER_MINUTE (default
// 1,000) unauthenticated requests that each make the largest sample they can
// (worstJunkRequest), each from an address of its own and half of them to a name of
// their own, for HOOKDEDUP_JUNK_MINUTES (default 10) minutes, straight to the handler:
// how much the database grows per minute. The dashboard's totals are rolled up as
// serve keeps them.
//
// Beside real traffic: three simulated minutes of the same junk over HTTP beside 100
// signed deliveries a minute; every real delivery must be answered 200 and committed,
// and its answer times are reported.
func TestRejections_FloodMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	minutes, perMinute := envInt(t, "HOOKDEDUP_JUNK_MINUTES", 10), envInt(t, "HOOKDEDUP_JUNK_PER_MINUTE", 1000)
	ctx := context.Background()

	e := newJunkEnv(t, sqlite.Options{})
	before := dbSize(t, e.db.Path())
	for m := range minutes {
		e.clock.Add(time.Minute)
		for i := range perMinute {
			source, want := "ota", http.StatusUnauthorized
			if i%2 == 0 {
				source, want = fmt.Sprintf("junk-%d-%d", m, i), http.StatusNotFound
			}
			if code := e.worstJunkRequest(t, m*perMinute+i, source); code != want {
				t.Fatalf("junk to %s: %d, want %d", source, code, want)
			}
		}
	}
	if err := e.rc.FlushRejections(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.RollupStats(ctx, 1<<20); err != nil { // the dashboard's totals, as serve keeps them
		t.Fatal(err)
	}
	growth := dbSize(t, e.db.Path()) - before
	t.Logf("worst case: %d simulated minutes of %d junk requests a minute (each makes the largest sample it can, from its own address, half to names of their own): the database grew by %d bytes, %d a minute",
		minutes, perMinute, growth, growth/int64(minutes))
	var stored, largest int64
	err := rawDB(t, e.db.Path()).QueryRowContext(ctx, `SELECT count(*), max(octet_length(source) + octet_length(error)
		+ octet_length(remote_addr) + octet_length(content_type) + octet_length(headers)) FROM deliveries`).Scan(&stored, &largest)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples stored; the largest holds %d bytes of text", stored, largest)

	const nReal = 100
	e = newJunkEnv(t, sqlite.Options{})
	te := &testEnv{db: e.db, srv: e.srv, src: e.src}
	// Real deliveries of one simulated minute, signed at its time, from two senders;
	// their answer times.
	sendReal := func(minute int) []time.Duration {
		var mu sync.Mutex
		var took []time.Duration
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				for i := w; i < nReal; i += 2 {
					id := fmt.Sprintf("msg_real_%d_%d", minute, i)
					body := fmt.Sprintf(`{"property_id":"HTL-1","booking_id":"BK-%d-%d","status":"cancelled"}`, minute, i)
					start := time.Now()
					code, a, _ := te.post(t, "ota", "", body, func(r *http.Request) {
						r.Header.Set("webhook-id", id)
						e.src.Verifier.Sign(r.Header, nil, []byte(body), e.clock.Now())
					})
					d := time.Since(start)
					if code != 200 || a.Status != "accepted" {
						t.Errorf("real delivery %s beside junk: %d %+v, want 200 accepted", id, code, a)
					}
					mu.Lock()
					took = append(took, d)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return took
	}
	quantiles := func(d []time.Duration) (p50, p99 time.Duration) {
		slices.Sort(d)
		return d[len(d)/2].Round(10 * time.Microsecond), d[len(d)*99/100].Round(10 * time.Microsecond)
	}
	quiet := sendReal(-1)
	const besideMinutes = 3
	var beside []time.Duration
	var junkTime time.Duration
	for m := range besideMinutes {
		e.clock.Add(time.Minute)
		var took []time.Duration
		var wg sync.WaitGroup
		wg.Go(func() { took = sendReal(m) })
		start := time.Now()
		if bad := sendJunk(t, e.srv.URL, perMinute, 6); bad > 0 {
			t.Fatalf("%d junk requests not answered as they should be", bad)
		}
		junkTime += time.Since(start)
		wg.Wait()
		beside = append(beside, took...)
	}
	if err := e.rc.FlushRejections(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := storagetest.CountDeliveries(ctx, e.db, "ota")
	if err != nil {
		t.Fatal(err)
	}
	if c.Accepted != nReal*(besideMinutes+1) {
		t.Fatalf("%d real deliveries committed, want %d", c.Accepted, nReal*(besideMinutes+1))
	}
	q50, q99 := quantiles(quiet)
	b50, b99 := quantiles(beside)
	t.Logf("beside real traffic: %d simulated minutes of %d junk requests over HTTP (%.0f a second on this machine) and %d signed deliveries a minute",
		besideMinutes, perMinute, float64(besideMinutes*perMinute)/junkTime.Seconds(), nReal)
	t.Logf("real deliveries: all %d answered 200 and committed; answer time p50 %s p99 %s alone, p50 %s p99 %s beside the junk",
		nReal*(besideMinutes+1), q50, q99, b50, b99)
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

// junkMinutes sends, for each of minutes minutes, as many unauthenticated requests as
// are stored a minute (DefaultRejectionsTotal), each from its own address, to an unknown
// source, each with eight headers of pad. It returns how much the database grew a
// minute, and the largest sample's headers: their size as kept (names and values) and
// as stored (the headers column).
func junkMinutes(t *testing.T, pad string, minutes int) (growth int64, kept, stored int) {
	t.Helper()
	e := newJunkEnv(t, sqlite.Options{})
	before := dbSize(t, e.db.Path())
	for m := range minutes {
		for i := range receiver.DefaultRejectionsTotal {
			req := httptest.NewRequest(http.MethodPost, "/webhooks/nope", strings.NewReader(`{}`))
			req.RemoteAddr = fmt.Sprintf("198.51.%d.%d:1000", m, i+1)
			for h := range 8 {
				req.Header.Set(fmt.Sprintf("X-P%d", h), pad)
			}
			w := httptest.NewRecorder()
			e.mux.ServeHTTP(w, req)
			if w.Code != http.StatusNotFound {
				t.Fatalf("junk %d: %d, want 404", i, w.Code)
			}
		}
		e.clock.Add(time.Minute)
	}
	growth = (dbSize(t, e.db.Path()) - before) / int64(minutes)

	rows, err := rawDB(t, e.db.Path()).QueryContext(context.Background(),
		`SELECT headers FROM deliveries WHERE outcome = 'rejected'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var h http.Header
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			t.Fatal(err)
		}
		size := 0
		for name, values := range h {
			for _, v := range values {
				size += len(name) + len(v)
			}
		}
		n++
		kept, stored = max(kept, size), max(stored, len(raw))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != minutes*receiver.DefaultRejectionsTotal {
		t.Fatalf("%d samples stored, want %d", n, minutes*receiver.DefaultRejectionsTotal)
	}
	t.Logf("%d samples in %d minutes: the largest keeps %d bytes of headers, stored in %d bytes; the database grew by %d bytes a minute",
		n, minutes, kept, stored, growth)
	return growth, kept, stored
}

// junkBytesPerMinute is the README's bound on what junk from any number of addresses
// adds to the database a minute (TestRejections_FloodMeasured measures the worst case).
const junkBytesPerMinute = 48_000

// maxStoredSampleHeaders is what a stored sample's headers take in the database at
// most: "headers cut to 1.5 KiB as stored".
const maxStoredSampleHeaders = 1536

// TestRejections_SampleHeadersBoundedAsStored: a stored sample of an unauthenticated
// rejection keeps its headers cut to 1.5 KiB as stored. Headers are stored as JSON,
// where '<', '>' and '&' take six bytes each (\u003c), and so does every invalid UTF-8
// byte (\ufffd): a cut that counted the bytes received let a sender who pads with them
// store six times the bound.
func TestRejections_SampleHeadersBoundedAsStored(t *testing.T) {
	for _, pad := range []string{strings.Repeat("<", 500), strings.Repeat("\xffa", 250), strings.Repeat("\u2028", 200)} {
		growth, kept, stored := junkMinutes(t, pad, 5)
		if stored > maxStoredSampleHeaders {
			t.Errorf("a sample's headers, cut to %d bytes, take %d bytes in the database, over %d", kept, stored, maxStoredSampleHeaders)
		}
		if growth > junkBytesPerMinute {
			t.Errorf("junk from many addresses grew the database by %d bytes a minute, over %d", growth, junkBytesPerMinute)
		}
	}
}

// TestRejections_JunkGrowthPerMinute: junk from any number of addresses grows the
// database by at most junkBytesPerMinute a minute. With plain ASCII headers that fill
// what a sample keeps, a sample row must still share its 4 KiB page with another.
func TestRejections_JunkGrowthPerMinute(t *testing.T) {
	growth, _, _ := junkMinutes(t, strings.Repeat("j", 500), 10)
	if growth > junkBytesPerMinute {
		t.Errorf("junk from many addresses grew the database by %d bytes a minute, over %d", growth, junkBytesPerMinute)
	}
}

// rawDB is a connection of the test's own to the database file at path.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	c, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRejections_UnknownNamesTotalledTogether: unauthenticated rejections are counted
// per minute, source (or unknown name) and status, and the counts are kept for
// retention. The dashboard's hourly totals, which no sweep deletes, must not keep rows
// per unknown name: a sender who asks for new names each minute would add rows that
// outlive retention, without end. They total every unknown name under one row, so the
// dashboard's figure for unknown sources stays whole.
func TestRejections_UnknownNamesTotalledTogether(t *testing.T) {
	e := newJunkEnv(t, sqlite.Options{})
	ctx := context.Background()
	const hours = 3
	for m := range hours * 60 {
		// As many names a minute as are sampled, and as are counted by name.
		for i := range receiver.DefaultRejectionsTotal + 8 {
			req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/webhooks/junk-%d-%d", m, i), strings.NewReader(`{}`))
			req.RemoteAddr = fmt.Sprintf("198.51.%d.%d:1000", m%250, i+1)
			w := httptest.NewRecorder()
			e.mux.ServeHTTP(w, req)
			if w.Code != http.StatusNotFound {
				t.Fatalf("junk: %d, want 404", w.Code)
			}
		}
		e.clock.Add(time.Minute)
		if err := e.rc.FlushRejections(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.db.RollupStats(ctx, 100000); err != nil {
		t.Fatal(err)
	}

	// Retention (an hour, say) passes; every sweep runs to its end.
	e.clock.Add(2 * time.Hour)
	now := e.clock.Now()
	cutoff := now.Add(-time.Hour)
	enginetest.CatchUpRollups(t, e.db)
	var from storage.SweepCursor
	for range 1000 {
		_, next, err := e.db.SweepDeliveries(ctx, now, cutoff, from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if from = next; next.Done() {
			break
		}
	}
	for range 1000 {
		n, err := e.db.SweepRejectionCounts(ctx, cutoff, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	var rows, junk int64
	err := rawDB(t, e.db.Path()).QueryRowContext(ctx, `SELECT count(*), coalesce(sum(length(source)), 0)
		FROM delivery_stats WHERE source LIKE 'junk-%'`).Scan(&rows, &junk)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d hours of junk names and a retention sweep: %d rows of hourly totals name junk sources (%d bytes of names)", hours, rows, junk)
	if rows > hours {
		t.Errorf("%d rows of hourly totals for unknown names outlive retention: junk storage grows without bound", rows)
	}
	stats, err := e.db.DeliveryStats(ctx, now.Add(-(hours+3)*time.Hour), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var unknown int64
	for _, b := range stats {
		if b.Outcome == storage.Rejected && b.Source == storage.UnknownSources {
			unknown += b.Deliveries
		}
	}
	if want := int64(hours * 60 * (receiver.DefaultRejectionsTotal + 8)); unknown != want {
		t.Errorf("the hourly totals count %d rejections of unknown names, want all %d", unknown, want)
	}
}

// TestRejections_CountedInTheStoresMinute: the rejections counted rather than stored
// fall in the minute of the store's clock (a PostgreSQL replica keeps the server's),
// beside the rejections stored, not in that of a machine whose clock is hours off.
func TestRejections_CountedInTheStoresMinute(t *testing.T) {
	ctx := context.Background()
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	clock := storagetest.NewClock(time.Date(2026, 3, 2, 10, 0, 1, 0, time.UTC))
	db.Now = clock.Now
	machine := func() time.Time { return clock.Now().Add(-3 * time.Hour) }
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{otaSource(t)}, Store: db, Now: machine, Clock: db.Clock})
	mux := http.NewServeMux()
	rc.Register(mux)
	for i := range receiver.DefaultRejectionsTotal + 5 {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/nope", strings.NewReader(`{}`))
		req.RemoteAddr = fmt.Sprintf("198.51.100.%d:1000", i+1)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if w.Code != http.StatusNotFound {
			t.Fatalf("junk: %d, want 404", w.Code)
		}
	}
	if err := rc.FlushRejections(ctx); err != nil {
		t.Fatal(err)
	}
	var minute, n int64
	if err := rawDB(t, db.Path()).QueryRowContext(ctx, `SELECT minute, sum(rejections) FROM rejection_counts GROUP BY minute`).
		Scan(&minute, &n); err != nil {
		t.Fatal(err)
	}
	if want := clock.Now().UnixMilli() / 60000; minute != want || n == 0 {
		t.Fatalf("%d rejections counted in minute %d, want minute %d, the store's (the machine's is %d)",
			n, minute, want, machine().UnixMilli()/60000)
	}
}
