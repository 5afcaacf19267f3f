package receiver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_HungDownstreamLeavesOtherSourcesAWorker: a downstream that hangs holds
// each attempt for attempt_timeout. With a queue of its events it took every worker,
// and another source's event waited behind that whole queue (40 events, 8 workers,
// 3 s each: 15 s). It may hold all workers but one while another source forwards, so
// the other source's event goes at once, and the hung one is still tried 7 at a time.
func TestDispatch_HungDownstreamLeavesOtherSourcesAWorker(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(hung.Close)
	arrived := make(chan time.Time, 1)
	pms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case arrived <- time.Now():
		default:
		}
	}))
	t.Cleanup(pms.Close)

	db := storagetest.Open(t)
	ota := forwardSource(t, hung.URL, 10)
	ota.AttemptTimeout = 3 * time.Second
	other := forwardSource(t, pms.URL, 10)
	other.Name = "pms"
	for i := range 40 {
		accept(t, db, fmt.Sprintf("evt_%d", i), `{}`)
	}
	d := startDispatcher(t, db, ota, other)
	storagetest.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if inFlight < 7 {
			return fmt.Errorf("%d hand-offs to the hung downstream under way; want 7", inFlight)
		}
		return nil
	})
	sent := time.Now()
	storagetest.Record(t, db, &storage.Delivery{Source: "pms", Key: "evt_pms", KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
	d.Wake()
	select {
	case at := <-arrived:
		if wait := at.Sub(sent); wait > 2*time.Second {
			t.Errorf("the other source's event went downstream %v after it was accepted; want at once", wait)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the other source's event did not go downstream within 20 s")
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 7 {
		t.Errorf("at most %d hand-offs to the hung downstream at once; want 7 of the 8 workers", most)
	}
}

// TestDispatch_HungDownstreamsLeaveAHealthySourceAWorker: with 4 workers, each of up to
// 3 sources whose downstreams hang (each holding its attempts for attempt_timeout)
// began its queue before the healthy source had anything to send. Each hung source was
// held to all workers but one, so two of them took all 4 between them, and the healthy
// source's events waited for an attempt to time out, then behind their whole queues.
// The healthy source's events must go downstream while every hung attempt is still
// open, however many hung sources there are below the number of workers.
func TestDispatch_HungDownstreamsLeaveAHealthySourceAWorker(t *testing.T) {
	const workers = 4
	for hung := 1; hung < workers; hung++ {
		t.Run(fmt.Sprintf("%d hung", hung), func(t *testing.T) {
			db := storagetest.Open(t)
			healthy := newCountingDownstream(t)
			var sources []receiver.Source
			downstreams := make([]*hungDownstream, hung)
			for i := range downstreams {
				downstreams[i] = newHungDownstream(t)
				defer downstreams[i].release()
				src := forwardSource(t, downstreams[i].srv.URL, 10)
				src.Name, src.AttemptTimeout = fmt.Sprintf("hung%d", i), time.Minute
				sources = append(sources, src)
			}
			src := forwardSource(t, healthy.srv.URL, 10)
			src.Name, src.AttemptTimeout = "healthy", 5*time.Second
			d := runSharedDispatcher(t, db, workers, nil, append(sources, src)...)

			// Each hung source's queue begins while the healthy source has nothing due,
			// and its attempts are under way before the next one's begins.
			for i, ds := range downstreams {
				for n := range 6 {
					queue(t, db, sources[i].Name, fmt.Sprintf("evt_%d", n))
				}
				d.Wake()
				storagetest.Eventually(t, 10*time.Second, func() error {
					if ds.open() == 0 {
						return fmt.Errorf("no hand-off of %s under way", sources[i].Name)
					}
					return nil
				})
			}
			for n := range 3 {
				queue(t, db, "healthy", fmt.Sprintf("evt_%d", n))
			}
			d.Wake()
			storagetest.Eventually(t, 15*time.Second, func() error {
				if got := healthy.count(); got < 3 {
					held := 0
					for _, ds := range downstreams {
						held += ds.open()
					}
					return fmt.Errorf("the healthy downstream got %d of its 3 events while the %d hung ones hold %d of the %d workers",
						got, hung, held, workers)
				}
				return nil
			})
			for i, ds := range downstreams {
				if ds.ended() != 0 {
					t.Errorf("%d hand-offs to %s ended; want every one still open while the healthy source's events went", ds.ended(), sources[i].Name)
				}
			}
		})
	}
}

// hungDownstream accepts each hand-off and answers none until released (or the attempt
// is given up).
type hungDownstream struct {
	srv         *httptest.Server
	mu          sync.Mutex
	opened, end int
	hold        chan struct{}
	release     func()
}

func newHungDownstream(t *testing.T) *hungDownstream {
	h := &hungDownstream{hold: make(chan struct{})}
	h.release = sync.OnceFunc(func() { close(h.hold) })
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		h.mu.Lock()
		h.opened++
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			h.end++
			h.mu.Unlock()
		}()
		select {
		case <-r.Context().Done():
		case <-h.hold:
		}
	}))
	t.Cleanup(h.srv.Close)
	t.Cleanup(h.release) // before the server closes, which waits for its handlers
	return h
}

// open is how many hand-offs it holds.
func (h *hungDownstream) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.opened - h.end
}

// ended is how many hand-offs it held have ended.
func (h *hungDownstream) ended() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.end
}

// countingDownstream answers every hand-off 200 at once and counts the distinct
// Idempotency-Keys it got.
type countingDownstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]bool
}

func newCountingDownstream(t *testing.T) *countingDownstream {
	c := &countingDownstream{keys: map[string]bool{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		c.mu.Lock()
		c.keys[r.Header.Get("Idempotency-Key")] = true
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *countingDownstream) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.keys)
}

// queue records an accepted delivery of key to source, queued for dispatch.
func queue(t *testing.T, db storage.Store, source, key string) {
	t.Helper()
	storagetest.Record(t, db, &storage.Delivery{Source: source, Key: key, KeyMethod: "event_id", PayloadHash: "h",
		Body: []byte(`{}`)}, storage.ClaimOptions{TTL: time.Hour, Dispatch: true})
}

// runSharedDispatcher runs a dispatcher of sources with workers workers on store (db
// when nil), until the test ends. It looks for work again only when woken, or once a
// minute: a test then knows which leases see which keys due.
func runSharedDispatcher(t *testing.T, db *sqlite.DB, workers int, store receiver.DispatchStore, sources ...receiver.Source) *receiver.Dispatcher {
	t.Helper()
	if store == nil {
		store = db
	}
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: store, Sources: sources, Workers: workers,
		Poll: time.Minute, FirstBackoff: 40 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// TestDispatch_ManySourcesLeaveABusyOneItsAttempts: each forwarding source is owed a
// worker, so with a fixed 8 workers a source beside nine others that forward had one
// attempt under way at a time, and its burst went downstream one hand-off after
// another. By default there is a worker for each, and a busy source holds seven
// attempts at once beside any number of others, as beside one; never more.
func TestDispatch_ManySourcesLeaveABusyOneItsAttempts(t *testing.T) {
	db := storagetest.Open(t)
	busy := newHungDownstream(t)
	defer busy.release()
	src := forwardSource(t, busy.srv.URL, 10)
	src.Name, src.AttemptTimeout = "busy", time.Minute
	sources := []receiver.Source{src}
	for i := range 9 {
		quiet := forwardSource(t, newCountingDownstream(t).srv.URL, 10)
		quiet.Name = fmt.Sprintf("quiet%d", i)
		sources = append(sources, quiet)
	}
	d := runSharedDispatcher(t, db, 0, nil, sources...) // the default number of workers
	for n := range 12 {
		queue(t, db, "busy", fmt.Sprintf("evt_%d", n))
	}
	most := 0
	storagetest.Eventually(t, 15*time.Second, func() error {
		d.Wake()
		most = max(most, busy.open())
		if busy.open() < 7 {
			return fmt.Errorf("%d hand-offs of the busy source under way beside 9 quiet sources; want 7", busy.open())
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // a lease past the share would have started by now
	if most = max(most, busy.open()); most != 7 {
		t.Errorf("%d hand-offs of the busy source under way at once; want 7, a worker left for each of the 9 others", most)
	}
}
