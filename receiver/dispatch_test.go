package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// downstream is a real HTTP server that misbehaves on purpose: it answers the first
// failFirst requests with 503 and hangs for hang on the requests listed in hangOn.
type downstream struct {
	srv *httptest.Server

	mu        sync.Mutex
	failFirst int
	hangOn    map[int]time.Duration
	requests  int            // hand-offs that arrived
	got       map[string]int // Idempotency-Key -> times received with a 2xx answer
	headers   []http.Header
	bodies    []string
}

func newDownstream(t *testing.T, failFirst int, hangOn map[int]time.Duration) *downstream {
	ds := &downstream{failFirst: failFirst, hangOn: hangOn, got: map[string]int{}}
	ds.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ds.mu.Lock()
		ds.requests++
		n := ds.requests
		hang := ds.hangOn[n]
		ds.mu.Unlock()
		if hang > 0 {
			select {
			case <-time.After(hang):
			case <-r.Context().Done():
				return
			}
		}
		if n <= ds.failFirst {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		ds.mu.Lock()
		ds.got[r.Header.Get("Idempotency-Key")]++
		ds.headers = append(ds.headers, r.Header.Clone())
		ds.bodies = append(ds.bodies, string(body))
		ds.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(ds.srv.Close)
	return ds
}

func (ds *downstream) received() map[string]int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := map[string]int{}
	for k, v := range ds.got {
		out[k] = v
	}
	return out
}

// arrived is how many hand-offs reached the downstream, answered or not.
func (ds *downstream) arrived() int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.requests
}

// startDispatcher runs a dispatcher over db until the test ends.
func startDispatcher(t *testing.T, db *sqlite.DB, sources ...receiver.Source) *receiver.Dispatcher {
	t.Helper()
	d, _ := runDispatcher(t, db, sources...)
	return d
}

// runDispatcher is startDispatcher that also returns stop, which ends the dispatcher
// and returns once every attempt it started has finished and been recorded.
func runDispatcher(t *testing.T, db *sqlite.DB, sources ...receiver.Source) (*receiver.Dispatcher, func()) {
	t.Helper()
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: sources, FirstBackoff: 40 * time.Millisecond,
		Poll: 50 * time.Millisecond, RecordOnlyAfter: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return d, stop
}

func forwardSource(t *testing.T, url string, maxAttempts int) receiver.Source {
	src := otaSource(t)
	src.ForwardURL, src.MaxAttempts, src.AttemptTimeout, src.MaxBackoff = url, maxAttempts, 300*time.Millisecond, time.Second
	return src
}

// accept records an accepted delivery of key to ota, queued for dispatch.
func accept(t *testing.T, db *sqlite.DB, key, body string) *storage.Delivery {
	t.Helper()
	return storagetest.Record(t, db, &storage.Delivery{Source: "ota", Key: key, KeyMethod: "event_id", PayloadHash: "h",
		ContentType: "application/json; charset=utf-8", Body: []byte(body)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
}

// waitState waits until the key of ota reaches state, for at most 10 s, and returns its
// claim then.
func waitState(t *testing.T, db *sqlite.DB, key, state string) storage.Claim {
	t.Helper()
	var c storage.Claim
	storagetest.Eventually(t, 10*time.Second, func() error {
		var err error
		if c, err = db.Claim(context.Background(), "ota", key); err != nil {
			return err
		}
		if c.State != state {
			return fmt.Errorf("key %s is %s (last error %q), want %s", key, c.State, c.LastError, state)
		}
		return nil
	})
	return c
}

func TestDispatch_RetriesWithGrowingBackoff(t *testing.T) {
	db := storagetest.Open(t)
	ds := newDownstream(t, 3, nil)
	startDispatcher(t, db, forwardSource(t, ds.srv.URL, 10))
	d := accept(t, db, "evt_1", `{"booking_id":"BK-1"}`)

	c := waitState(t, db, "evt_1", storage.StateProcessed)
	if c.Attempts != 4 {
		t.Fatalf("attempts = %d, want 4", c.Attempts)
	}
	if got := ds.received(); got["ota:evt_1"] != 1 || len(got) != 1 {
		t.Fatalf("downstream received %v, want ota:evt_1 once", got)
	}
	h := ds.headers[0]
	if h.Get("Content-Type") != "application/json; charset=utf-8" || h.Get("X-Hookdedup-Source") != "ota" ||
		h.Get("X-Hookdedup-Delivery") == "" || ds.bodies[0] != `{"booking_id":"BK-1"}` {
		t.Fatalf("hand-off headers %v body %q", h, ds.bodies[0])
	}
	atts, err := db.Attempts(context.Background(), "ota", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 4 || atts[0].Status != 503 || atts[0].Error == "" || atts[0].Response == "" || atts[3].Status != 202 || atts[3].Error != "" {
		t.Fatalf("attempts = %+v", atts)
	}
	if atts[0].Delivery != d.ID {
		t.Fatalf("attempt delivery = %d, want %d", atts[0].Delivery, d.ID)
	}
	// 40 ms, 80 ms, 160 ms (±20 %). An attempt cannot start before the previous one's
	// backoff has passed, but a busy machine can start it later, so only the least each
	// gap may be is checked: a backoff that does not double fails it (a flat 40 ms gives
	// a second gap under 64 ms). Times are stored in milliseconds, hence the 2 ms.
	gap := func(i int) time.Duration { return atts[i+1].StartedAt.Sub(atts[i].StartedAt) }
	for i, least := range []time.Duration{32 * time.Millisecond, 64 * time.Millisecond, 128 * time.Millisecond} {
		if gap(i) < least-2*time.Millisecond {
			t.Fatalf("backoff gaps %v, %v, %v: gap %d is under %v, the least a doubling backoff from 40 ms allows",
				gap(0), gap(1), gap(2), i, least)
		}
	}
}

func TestDispatch_TimeoutThenRecovery(t *testing.T) {
	db := storagetest.Open(t)
	ds := newDownstream(t, 0, map[int]time.Duration{1: 2 * time.Second})
	startDispatcher(t, db, forwardSource(t, ds.srv.URL, 5))
	accept(t, db, "evt_1", `{}`)
	waitState(t, db, "evt_1", storage.StateProcessed)
	atts, _ := db.Attempts(context.Background(), "ota", "evt_1")
	if len(atts) != 2 || atts[0].Error != "no answer within 300ms" || atts[1].Status != 202 {
		t.Fatalf("attempts = %+v, want a timeout then a success", atts)
	}
}

func TestDispatch_RefusedUntilFailed(t *testing.T) {
	t.Parallel() // waits on timers and locks of its own, with no tight time bound
	db := storagetest.Open(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/events"
	ln.Close()
	startDispatcher(t, db, forwardSource(t, closed, 3))
	accept(t, db, "evt_1", `{}`)
	c := waitState(t, db, "evt_1", storage.StateFailed)
	if c.Attempts != 3 || c.LastError == "" {
		t.Fatalf("failed claim = %+v, want 3 attempts and the last error", c)
	}
	stuck, err := db.ListKeys(context.Background(), storage.KeyFilter{Stuck: true, StuckBefore: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(stuck) != 1 || stuck[0].Key != "evt_1" {
		t.Fatalf("stuck keys = %+v, want evt_1", stuck)
	}
}

func TestDispatch_EveryEventOnce(t *testing.T) {
	db := storagetest.Open(t)
	ds := newDownstream(t, 5, nil)
	d := startDispatcher(t, db, forwardSource(t, ds.srv.URL, 10))
	const n = 60
	for i := range n {
		accept(t, db, "evt_"+string(rune('A'+i%26))+string(rune('a'+i/26)), `{}`)
		d.Wake()
	}
	storagetest.Eventually(t, 15*time.Second, func() error {
		if got := len(ds.received()); got < n {
			return fmt.Errorf("downstream got %d distinct events, want %d", got, n)
		}
		return nil
	})
	got := ds.received()
	if len(got) != n {
		t.Fatalf("downstream got %d distinct events, want %d", len(got), n)
	}
	for k, times := range got {
		if times != 1 {
			t.Errorf("%s received %d times", k, times)
		}
	}
}

// TestDispatch_DuplicatesDuringDispatch: duplicates that arrive while the first delivery
// is still with the downstream never cause a second hand-off.
func TestDispatch_DuplicatesDuringDispatch(t *testing.T) {
	t.Parallel() // waits on timers and locks of its own, with no tight time bound
	ds := newDownstream(t, 0, map[int]time.Duration{1: 500 * time.Millisecond})
	src := forwardSource(t, ds.srv.URL, 5)
	src.AttemptTimeout = 5 * time.Second
	e := newEnv(t, sqlite.Options{}, src)
	_, stop := runDispatcher(t, e.db, src)
	if code, a, _ := e.post(t, "ota", "msg_1", cancellation, nil); code != 200 || a.Status != "accepted" {
		t.Fatalf("first: %d %+v", code, a)
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		if ds.arrived() == 0 {
			return errors.New("the hand-off has not reached the downstream")
		}
		return nil
	})
	// The downstream holds the first hand-off (500 ms) while the duplicates arrive.
	for range 20 {
		if code, a, _ := e.post(t, "ota", "msg_1", cancellation, nil); code != 200 || a.Status != "duplicate" {
			t.Fatalf("duplicate: %d %+v", code, a)
		}
	}
	waitState(t, e.db, "msg_1", storage.StateProcessed)
	// Once stopped, the dispatcher has finished every hand-off it started: a second one
	// caused by a duplicate would have reached the downstream by now.
	stop()
	if got := ds.received(); got["ota:msg_1"] != 1 || ds.arrived() != 1 {
		t.Fatalf("downstream received %v (%d hand-offs), want ota:msg_1 once", got, ds.arrived())
	}
	if c, err := e.db.Claim(context.Background(), "ota", "msg_1"); err != nil || c.State != storage.StateProcessed || c.Attempts != 1 {
		t.Fatalf("claim = %+v, %v; want processed after one attempt", c, err)
	}
}

func TestDispatch_RecordOnlySource(t *testing.T) {
	e := newEnv(t, sqlite.Options{})
	if code, a, _ := e.post(t, "ota", "msg_1", cancellation, nil); code != 200 || a.Status != "accepted" {
		t.Fatalf("first: %d %+v", code, a)
	}
	c, err := e.db.Claim(context.Background(), "ota", "msg_1")
	if err != nil || c.State != storage.StateProcessed {
		t.Fatalf("claim = %+v, %v; want processed at once", c, err)
	}
}

func TestDispatch_ReprocessRecordOnly(t *testing.T) {
	t.Parallel() // waits on timers and locks of its own, with no tight time bound
	db := storagetest.Open(t)
	src := otaSource(t) // no forward_url
	startDispatcher(t, db, src)
	d := &storage.Delivery{Source: "ota", Key: "k", KeyMethod: "event_id", PayloadHash: "h", Body: []byte(`{}`)}
	if err := db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReleaseKey(context.Background(), storage.Release{Source: "ota", Key: "k", Actor: "t", Reason: "r", Reprocess: true}); err != nil {
		t.Fatal(err)
	}
	waitState(t, db, "k", storage.StateProcessed)
	atts, _ := db.Attempts(context.Background(), "ota", "k")
	if len(atts) != 1 || atts[0].Error != "" || !strings.Contains(atts[0].Response, "record only") {
		t.Fatalf("attempts = %+v", atts)
	}
}

// TestDispatch_ReplicasWithDifferentConfigs: during a rolling change of the sources,
// replicas on one database run different configurations. A replica whose configuration
// lacks a source, or gives it no forward_url, must leave that source's queued keys to a
// replica that forwards them: settling them unsent or failing them would lose the
// hand-off for good.
func TestDispatch_ReplicasWithDifferentConfigs(t *testing.T) {
	ctx := context.Background()
	db := storagetest.Open(t)
	ds := newDownstream(t, 0, nil)
	accept(t, db, "evt_1", `{"id":"evt_1"}`)
	accept(t, db, "evt_2", `{"id":"evt_2"}`)
	other := storagetest.Record(t, db, &storage.Delivery{Source: "cm", Key: "c1", KeyMethod: "event_id", PayloadHash: "h",
		ContentType: "application/json", Body: []byte(`{"id":"c1"}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})

	// The old replica: ota is record-only there, and cm unknown. A replica that forwards
	// ota is running, but has not got to its keys yet.
	if err := db.DispatcherSeen(ctx, "new", []string{"ota", "cm"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	old := &leaseCounter{DB: db}
	oldDisp := receiver.NewDispatcher(receiver.DispatchConfig{Store: old, Sources: []receiver.Source{otaSource(t)},
		Poll: 10 * time.Millisecond, RecordOnlyAfter: time.Millisecond})
	oldCtx, stopOld := context.WithCancel(ctx)
	oldDone := make(chan struct{})
	go func() { oldDisp.Run(oldCtx); close(oldDone) }()
	t.Cleanup(func() { stopOld(); <-oldDone })
	for i := 0; old.leases.Load() < 10; i++ {
		if i == 1000 {
			t.Fatal("the old replica's dispatcher did not look for work ten times")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, k := range []struct{ source, key string }{{"ota", "evt_1"}, {"ota", "evt_2"}, {"cm", "c1"}} {
		c, err := db.Claim(ctx, k.source, k.key)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := db.Attempts(ctx, k.source, k.key)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != storage.StateProcessing || len(atts) != 0 {
			t.Fatalf("%s/%s is %s after %d attempts (%+v) on the replica without its forward_url; want it left processing",
				k.source, k.key, c.State, len(atts), atts)
		}
	}

	// The new replica forwards both sources: every key reaches the downstream once.
	cm := forwardSource(t, ds.srv.URL, 3)
	cm.Name = "cm"
	startDispatcher(t, db, forwardSource(t, ds.srv.URL, 3), cm)
	waitState(t, db, "evt_1", storage.StateProcessed)
	waitState(t, db, "evt_2", storage.StateProcessed)
	storagetest.Eventually(t, 10*time.Second, func() error {
		if c, err := db.Claim(ctx, "cm", "c1"); err != nil || c.State != storage.StateProcessed {
			return fmt.Errorf("cm/c1 is %s, %v; want processed", c.State, err)
		}
		return nil
	})
	if got := ds.received(); len(got) != 3 || got["ota:evt_1"] != 1 || got["ota:evt_2"] != 1 || got["cm:c1"] != 1 {
		t.Fatalf("downstream received %v, want each of the three keys once", got)
	}
	if atts, err := db.Attempts(ctx, "cm", "c1"); err != nil || len(atts) != 1 || atts[0].Delivery != other.ID || atts[0].Status != 202 {
		t.Fatalf("cm/c1's attempts: %+v, %v; want the one hand-off", atts, err)
	}
}

// TestDispatch_RecordOnlyWaitsForBusyForwarder: a replica that has a source without a
// forward_url leaves its keys to a replica that forwards it for as long as that one is
// seen, however far behind its downstream keeps it; once no replica has been seen
// forwarding the source for ForwarderGone, its queued keys are settled unsent.
func TestDispatch_RecordOnlyWaitsForBusyForwarder(t *testing.T) {
	t.Parallel() // waits on a slow downstream, with no tight time bound
	ctx := context.Background()
	db := storagetest.Open(t)
	hang := map[int]time.Duration{}
	const n = 12
	for i := 1; i <= n; i++ {
		hang[i] = 100 * time.Millisecond
	}
	ds := newDownstream(t, 0, hang)
	for i := range n {
		accept(t, db, fmt.Sprintf("evt_%02d", i), fmt.Sprintf(`{"id":"evt_%02d"}`, i))
	}
	run := func(cfg receiver.DispatchConfig) {
		cfg.Store, cfg.Poll = db, 10*time.Millisecond
		d := receiver.NewDispatcher(cfg)
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	src := forwardSource(t, ds.srv.URL, 3)
	src.AttemptTimeout = 2 * time.Second
	run(receiver.DispatchConfig{Sources: []receiver.Source{src}, Workers: 2})
	storagetest.Eventually(t, 10*time.Second, func() error {
		if f, err := db.ForwardedSources(ctx, time.Now().Add(-time.Minute)); err != nil || !slices.Contains(f, "ota") {
			return fmt.Errorf("forwarded sources %v, %v; want the forwarder seen with ota", f, err)
		}
		return nil
	})
	run(receiver.DispatchConfig{Sources: []receiver.Source{otaSource(t)}, RecordOnlyAfter: 20 * time.Millisecond})
	for i := range n {
		waitState(t, db, fmt.Sprintf("evt_%02d", i), storage.StateProcessed)
	}
	if got := ds.received(); len(got) != n {
		t.Fatalf("downstream received %d of %d keys; the record-only replica settled the rest unsent", len(got), n)
	}

	// A forwarder gone (last seen longer ago than ForwarderGone): its source's queued
	// key is settled by the record-only replica, unsent.
	seenOnly := storagetest.Open(t)
	accept(t, seenOnly, "evt_late", `{"id":"evt_late"}`)
	if err := seenOnly.DispatcherSeen(ctx, "gone", []string{"ota"}, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: seenOnly, Sources: []receiver.Source{otaSource(t)},
		Poll: 10 * time.Millisecond, RecordOnlyAfter: 20 * time.Millisecond})
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(dctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitState(t, seenOnly, "evt_late", storage.StateProcessed)
	if atts, err := seenOnly.Attempts(ctx, "ota", "evt_late"); err != nil || len(atts) != 1 || !strings.Contains(atts[0].Response, "record only") {
		t.Fatalf("attempts = %+v, %v; want the one record-only settlement", atts, err)
	}
}

// TestDispatch_RecordOnlyIntakeWhileForwardedElsewhere: a delivery taken in by a replica
// that has its source without a forward_url, while another replica forwards the source,
// is queued rather than settled at once, and the forwarding replica hands it on; once
// no replica forwards the source any more, intake settles its deliveries at once again.
func TestDispatch_RecordOnlyIntakeWhileForwardedElsewhere(t *testing.T) {
	t.Parallel() // waits for a forwarder to count as gone, with no tight time bound
	ctx := context.Background()
	ds := newDownstream(t, 0, nil)
	e := newEnv(t, sqlite.Options{})
	if err := e.db.DispatcherSeen(ctx, "new", []string{"ota"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	recordOnly := receiver.NewDispatcher(receiver.DispatchConfig{Store: e.db, Sources: []receiver.Source{otaSource(t)},
		Poll: 10 * time.Millisecond, RecordOnlyAfter: time.Millisecond, ForwarderGone: 3 * time.Second})
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { recordOnly.Run(dctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	storagetest.Eventually(t, 10*time.Second, func() error {
		if !recordOnly.ForwardedElsewhere("ota") {
			return errors.New("the record-only replica has not seen ota forwarded elsewhere")
		}
		return nil
	})
	rc := receiver.New(receiver.Config{Sources: []receiver.Source{otaSource(t)}, Store: e.db, MaxBody: 4096,
		ForwardedElsewhere: recordOnly.ForwardedElsewhere})
	e.srv = serveReceiver(t, rc, nil)
	if code, a, _ := e.post(t, "ota", "msg_1", cancellation, nil); code != 200 || a.Status != "accepted" {
		t.Fatalf("delivery: %d %+v", code, a)
	}
	if c, err := e.db.Claim(ctx, "ota", "msg_1"); err != nil || c.State != storage.StateProcessing {
		t.Fatalf("claim = %+v, %v; want it queued for the replica that forwards ota", c, err)
	}
	// The forwarding replica hands it on.
	forwarding := forwardSource(t, ds.srv.URL, 3)
	_, stop := runDispatcher(t, e.db, forwarding)
	waitState(t, e.db, "msg_1", storage.StateProcessed)
	if got := ds.received(); got["ota:msg_1"] != 1 {
		t.Fatalf("downstream received %v, want ota:msg_1 once", got)
	}

	// The forwarding replica stops, and is soon counted gone.
	stop()
	storagetest.Eventually(t, 20*time.Second, func() error {
		if recordOnly.ForwardedElsewhere("ota") {
			return errors.New("the record-only replica still sees ota forwarded elsewhere")
		}
		return nil
	})
	if code, a, _ := e.post(t, "ota", "msg_2", cancellation, nil); code != 200 || a.Status != "accepted" {
		t.Fatalf("delivery: %d %+v", code, a)
	}
	if c, err := e.db.Claim(ctx, "ota", "msg_2"); err != nil || c.State != storage.StateProcessed || c.Attempts != 0 {
		t.Fatalf("claim = %+v, %v; want it settled at once, unsent, with no replica forwarding ota", c, err)
	}
}

// TestDispatcher_PausesOnceFileGone: once the database file has left its path, the
// dispatcher leases nothing, so it hands nothing downstream and counts no attempt: a
// hand-off recorded only in the removed file would be lost at the restart, and made
// again then. It says so once in the log.
func TestDispatcher_PausesOnceFileGone(t *testing.T) {
	ds := newDownstream(t, 0, nil)
	path := filepath.Join(t.TempDir(), "hookdedup.db")
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	accept(t, db, "evt_1", `{"id":"evt_1"}`)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	var logs syncBuffer
	st := &leaseCounter{DB: db}
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: st, Sources: []receiver.Source{forwardSource(t, ds.srv.URL, 3)},
		Poll: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	// Several rounds: the dispatcher looks for work again after each.
	for i := 0; st.leases.Load() < 5; i++ {
		if i == 1000 {
			t.Fatal("the dispatcher did not look for work five times")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done

	ds.mu.Lock()
	requests := ds.requests
	ds.mu.Unlock()
	if requests != 0 {
		t.Errorf("the downstream got %d requests after the database file was removed, want none", requests)
	}
	if n := strings.Count(logs.String(), "dispatch paused"); n != 1 {
		t.Errorf("%d log lines say dispatch paused, want one:\n%s", n, logs.String())
	}
}

// leaseCounter is a database whose LeaseDue calls are counted.
type leaseCounter struct {
	*sqlite.DB
	leases atomic.Int64
}

func (c *leaseCounter) LeaseDue(ctx context.Context, now time.Time, lease time.Duration, limit int, sources []string) ([]storage.Job, error) {
	c.leases.Add(1)
	return c.DB.LeaseDue(ctx, now, lease, limit, sources)
}
