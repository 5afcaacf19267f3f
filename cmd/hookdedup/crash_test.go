package main

// The crash test: concurrent signed traffic with duplicates, SIGKILL at random
// moments, a restart after each kill, and at the end a reckoning against what the senders
// and the downstream saw. `go test ./...` runs a short form (4 kills), `go test -short`
// none; HOOKDEDUP_CRASH_KILLS=N (make crash-test) runs the long one.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
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
	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// crashKeyFields are the "cm" source's key fields: its deliveries carry no usable event
// id, so their keys are derived.
var crashKeyFields = []string{"/property_id", "/booking_id", "/status"}

// crashAttemptTimeout is the sources' attempt_timeout in crashConfig.
const crashAttemptTimeout = 3 * time.Second

// crashConfig is the configuration of incarnation inc: the forward URL names the
// incarnation, so the downstream knows which process handed each event off.
func crashConfig(sinkURL string, inc int) string {
	return fmt.Sprintf(`
log_level = "warn"
[[source]]
name = "ota"
signature = "standard-webhooks"
secret = %[1]q
forward_url = "%[2]s/events?inc=%[3]d"
max_attempts = 1000
attempt_timeout = "%[4]s"
max_backoff = "1s"

[[source]]
name = "cm"
signature = "standard-webhooks"
secret = %[1]q
event_id = ""
key_fields = ["/property_id", "/booking_id", "/status"]
forward_url = "%[2]s/events?inc=%[3]d"
max_attempts = 1000
attempt_timeout = "%[4]s"
max_backoff = "1s"
`, testSecret, sinkURL, inc, crashAttemptTimeout)
}

// kill ends the server with SIGKILL and waits until the process is gone.
func (s *server) kill(t *testing.T) {
	t.Helper()
	s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve still running 30s after SIGKILL")
	}
}

// checkLogs fails the test if any serve log in dir shows a panic or a corrupt database.
func checkLogs(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"panic", "fatal error", "malformed", "SIGSEGV", "SIGBUS"} {
			if i := strings.Index(string(b), bad); i >= 0 {
				t.Errorf("%s shows %q:\n%s", filepath.Base(name), bad, b[max(0, i-500):min(len(b), i+2000)])
			}
		}
	}
}

// crashEvent is one webhook event; senders deliver it until it is answered 200, and
// redeliver some of them on purpose.
type crashEvent struct {
	source string // "ota" (keyed by webhook-id) or "cm" (keyed by business fields)
	id     string // the webhook-id; for "cm" each delivery gets a fresh one
	body   []byte
	key    string // the key hookdedup must give it
	hash   string // SHA-256 of body: what the downstream must receive
	acked  atomic.Bool
}

// crashSend is one HTTP delivery as the sender saw it.
type crashSend struct {
	ev         *crashEvent
	code       int // 0: no answer (connection refused or cut by a kill)
	answer     map[string]string
	retryAfter string // the answer's Retry-After
	transport  string
}

// crashReceipt is one hand-off as the downstream saw it.
type crashReceipt struct {
	key      string // Idempotency-Key
	delivery string // X-Hookdedup-Delivery
	inc      int    // the incarnation that sent it
	hash     string
	at       time.Time
}

// crashSink is the downstream. It records each hand-off as soon as it arrives (that is
// when it acts on it) and is sometimes slow to answer, so that kills land between a
// hand-off and its being recorded.
type crashSink struct {
	mu  sync.Mutex
	got []crashReceipt
}

func (s *crashSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the sender died mid-body: nothing was handed off
	}
	inc, _ := strconv.Atoi(r.URL.Query().Get("inc"))
	sum := sha256.Sum256(body)
	s.mu.Lock()
	s.got = append(s.got, crashReceipt{
		key: r.Header.Get("Idempotency-Key"), delivery: r.Header.Get("X-Hookdedup-Delivery"),
		inc: inc, hash: hex.EncodeToString(sum[:]), at: time.Now(),
	})
	s.mu.Unlock()
	if rand.IntN(3) == 0 {
		// Slow on purpose: a kill may land while the hand-off is held here.
		time.Sleep(time.Duration(rand.IntN(250)) * time.Millisecond)
	}
	w.WriteHeader(http.StatusOK)
}

// crashReceipts formats hand-offs for a failure message.
func crashReceipts(rs []crashReceipt) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "[incarnation %d at %s, delivery %s] ", r.inc, r.at.Format("15:04:05.000"), r.delivery)
	}
	return b.String()
}

func (s *crashSink) receipts() []crashReceipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// crashTraffic is the senders' side: the events, every delivery and its answer.
type crashTraffic struct {
	t      *testing.T
	v      signature.Verifier
	client *http.Client
	url    atomic.Pointer[string] // the live server, or nil while it is down
	// pickURL, when set, chooses the server of each delivery instead (several
	// replicas): nil when none is up.
	pickURL func() *string

	mu     sync.Mutex
	events []*crashEvent
	sends  []crashSend
	next   int
}

func (c *crashTraffic) newEvent() *crashEvent {
	c.mu.Lock()
	c.next++
	n := c.next
	c.mu.Unlock()
	ev := &crashEvent{source: "ota", id: fmt.Sprintf("evt_%06d", n)}
	if n%3 == 0 {
		ev.source = "cm"
	}
	ev.body = fmt.Appendf(nil, `{"property_id":"HTL-%02d","booking_id":"BK-%06d","status":"cancelled","refund":{"amount":%d.%02d,"currency":"EUR"}}`,
		n%7, n, 50+n%400, n%100)
	sum := sha256.Sum256(ev.body)
	ev.hash = hex.EncodeToString(sum[:])
	spec := receiver.KeySpec{EventID: []string{"header:webhook-id"}}
	if ev.source == "cm" {
		spec = receiver.KeySpec{KeyFields: crashKeyFields}
	}
	d, err := receiver.Derive(spec, http.Header{"Webhook-Id": {ev.id}}, ev.body)
	if err != nil {
		panic(err)
	}
	ev.key = d.Key
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
	return ev
}

// pick returns an event to redeliver, mostly a recent one so that duplicates also
// arrive concurrently with their first delivery.
func (c *crashTraffic) pick() *crashEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) == 0 {
		return nil
	}
	if rand.IntN(4) == 0 {
		return c.events[rand.IntN(len(c.events))]
	}
	return c.events[max(0, len(c.events)-1-rand.IntN(20))]
}

// deliver sends ev once to the live server and records what came back. It reports
// false when no server was up to try.
func (c *crashTraffic) deliver(ev *crashEvent) (crashSend, bool) {
	u := c.url.Load()
	if c.pickURL != nil {
		u = c.pickURL()
	}
	if u == nil {
		return crashSend{}, false
	}
	return c.deliverTo(ev, *u), true
}

// deliverTo sends ev once to the server at url and records what came back.
func (c *crashTraffic) deliverTo(ev *crashEvent, url string) crashSend {
	id := ev.id
	if ev.source == "cm" {
		id = fmt.Sprintf("%s_%d", ev.id, rand.Int64())
	}
	req, err := signedRequest(c.v, url, ev.source, id, ev.body)
	if err != nil {
		panic(err)
	}
	s := crashSend{ev: ev}
	resp, err := c.client.Do(req)
	if err != nil {
		s.transport = err.Error()
	} else {
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			s.transport = err.Error() // cut mid-answer: as good as no answer
		} else {
			s.code, s.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
			if err := json.Unmarshal(raw, &s.answer); err != nil {
				s.answer = map[string]string{"error": "answer is not JSON: " + string(raw)}
			}
		}
	}
	if s.code == 200 {
		ev.acked.Store(true)
	}
	c.mu.Lock()
	c.sends = append(c.sends, s)
	c.mu.Unlock()
	return s
}

// sender delivers new events and redeliveries until stop is closed.
func (c *crashTraffic) sender(stop <-chan struct{}) {
	for range 1_000_000 {
		select {
		case <-stop:
			return
		default:
		}
		ev := c.pick()
		if ev == nil || rand.IntN(100) >= 35 {
			ev = c.newEvent()
		}
		// A provider redelivers what it got no 200 for; the harness does that at the end.
		// The pauses are the traffic's shape: a sender waits a moment while no server is
		// up, and deliveries arrive spread out rather than in lockstep.
		if _, ok := c.deliver(ev); !ok {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond)
	}
}

// answeredSince is how many deliveries from the i-th on were answered 200.
func (c *crashTraffic) answeredSince(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.sends[min(i, len(c.sends)):] {
		if s.code == 200 {
			n++
		}
	}
	return n
}

func crashKillCount(t *testing.T) (kills int, long bool) {
	if v := os.Getenv("HOOKDEDUP_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HOOKDEDUP_CRASH_KILLS=%q: want a positive number", v)
		}
		return n, true
	}
	if testing.Short() {
		t.Skip("long: a hand-off cut by a kill waits out its lease (attempt_timeout + 10s); make test runs it")
	}
	return 4, false
}

func TestCrash_KillNineLosesNothing(t *testing.T) {
	kills, long := crashKillCount(t)
	t.Parallel() // its own serve processes, files and ports; mostly waiting on kills and leases
	dir := t.TempDir()
	sink := &crashSink{}
	sinkSrv := httptest.NewServer(sink)
	defer sinkSrv.Close()

	traffic := &crashTraffic{t: t, v: standardWebhooks(t, testSecret), client: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16},
	}}
	start := func(inc int) *server {
		if err := os.WriteFile(filepath.Join(dir, "hookdedup.toml"), []byte(crashConfig(sinkSrv.URL, inc)), 0o600); err != nil {
			t.Fatal(err)
		}
		return startLogged(t, dir, fmt.Sprintf("serve-%02d.log", inc), nil)
	}

	const senders = 4
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopSenders := func() { stopOnce.Do(func() { close(stop) }) }
	defer stopSenders() // also when the test fails half-way
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() { traffic.sender(stop) })
	}
	killedAt := map[int]time.Time{} // incarnation -> when it was killed
	began := time.Now()
	inc := 0
	for ; inc < kills; inc++ {
		s := start(inc)
		traffic.url.Store(&s.url)
		// A random moment, from right after start-up (resuming work) to well into
		// steady traffic: the sleep is the point.
		time.Sleep(time.Duration(50+rand.IntN(1450)) * time.Millisecond)
		s.kill(t)
		killedAt[inc] = time.Now()
		traffic.url.Store(nil)
	}
	final := start(inc)
	traffic.mu.Lock()
	finalFrom := len(traffic.sends)
	traffic.mu.Unlock()
	traffic.url.Store(&final.url)
	// Traffic on the final incarnation too.
	storagetest.Eventually(t, time.Minute, func() error {
		if n := traffic.answeredSince(finalFrom); n < 50 {
			return fmt.Errorf("the final incarnation answered %d deliveries, want 50", n)
		}
		return nil
	})
	stopSenders()
	wg.Wait()
	trafficTime := time.Since(began)

	// A provider redelivers until it gets a 200: so does the harness, for what the kills
	// left unanswered.
	traffic.mu.Lock()
	events := slices.Clone(traffic.events)
	traffic.mu.Unlock()
	storagetest.Eventually(t, 2*time.Minute, func() error {
		var unanswered *crashEvent
		for _, ev := range events {
			if !ev.acked.Load() {
				if s, _ := traffic.deliver(ev); s.code != 200 {
					unanswered = ev
				}
			}
		}
		if unanswered != nil {
			return fmt.Errorf("%s/%s still unanswered", unanswered.source, unanswered.key)
		}
		return nil
	})

	// Drain: every key reaches the downstream, and none is left processing (a hand-off
	// cut by a kill is tried again once its lease ends, attempt_timeout + 10s).
	db, err := sqlite.Open(filepath.Join(dir, "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	// Processing first: a key that is processed now had its hand-off received by the sink
	// before, so the receipts read next hold it. Once none is, nothing more will reach
	// the downstream: the reckoning says what did.
	storagetest.Eventually(t, 3*time.Minute, func() error {
		processing, err := db.ListKeys(ctx, storage.KeyFilter{State: storage.StateProcessing, Limit: 1})
		if err != nil {
			return err
		}
		if len(processing) > 0 {
			return fmt.Errorf("keys are still processing, e.g. %+v", processing[0])
		}
		return nil
	})
	final.stop(t)
	checkLogs(t, dir)

	// The reckoning.
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
	r := reckon(t, db, traffic, sink, events, killedAt, nil)

	form := "short"
	if long {
		form = "long"
	}
	t.Logf("\ncrash test (%s form): %d SIGKILLs, %d incarnations, %d senders, traffic for %s\n%s",
		form, kills, kills+1, senders, trafficTime.Round(time.Millisecond), r)
}
