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
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestDispatch_ClockStepDuringAttemptHandsOffOnce: a lease runs out by the store's
// clock, which on SQLite is the machine's. A clock stepped forward while a hand-off is
// open (NTP setting a board without a real-time clock, a VM resumed) makes the lease
// look over: the dispatcher leases the key again, and must not hand the event off a
// second time while the first is open. The first attempt records its outcome in the
// interrupted row the newer lease wrote, and moves the key on under that lease, so the
// key is processed, not leased again, and its history lists the one hand-off once.
func TestDispatch_ClockStepDuringAttemptHandsOffOnce(t *testing.T) {
	db := storagetest.Open(t)
	clk := storagetest.NewClock(time.Now())
	db.Now = clk.Now // the wall clock, which the test can step as NTP would
	ds := newDownstream(t, 0, map[int]time.Duration{1: 2 * time.Second})
	src := otaSource(t)
	src.ForwardURL, src.MaxAttempts, src.AttemptTimeout, src.MaxBackoff = ds.srv.URL, 5, 5*time.Second, time.Second
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: []receiver.Source{src},
		Poll: 50 * time.Millisecond, Now: db.Clock})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { d.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	accept(t, db, "evt_step", `{"id":"evt_step"}`)
	d.Wake()
	storagetest.Eventually(t, 5*time.Second, func() error {
		if ds.arrived() == 0 {
			return context.DeadlineExceeded
		}
		return nil
	})
	// The first hand-off is open (the downstream answers after 2 s). NTP steps the clock.
	clk.Add(time.Minute)
	d.Wake()
	time.Sleep(1200 * time.Millisecond) // still within the first hand-off
	if n := ds.arrived(); n != 1 {
		t.Fatalf("%d hand-offs of one event reached the downstream while the first was still open; want 1", n)
	}
	storagetest.Eventually(t, 5*time.Second, func() error {
		c, err := db.Claim(context.Background(), "ota", "evt_step")
		if err == nil && c.State != storage.StateProcessed {
			err = fmt.Errorf("key %s after its hand-off was answered; want processed", c.State)
		}
		return err
	})
	if n := ds.arrived(); n != 1 {
		t.Fatalf("%d hand-offs of one event; want 1", n)
	}
	// The newer lease recorded the attempt as interrupted; its outcome took that row's
	// place: the history lists the one hand-off once.
	if as, err := db.Attempts(context.Background(), "ota", "evt_step"); err != nil || len(as) != 1 || as[0].Error != "" || as[0].Status/100 != 2 {
		t.Fatalf("history %+v, %v; want the one hand-off, answered 2xx", as, err)
	}
}

// TestDispatch_SwitchingProtocolsEndsTheAttempt: a downstream that answers 101
// Switching Protocols and then says nothing gets the raw connection back from net/http,
// which no longer watches the request's context: the read of its answer must still end
// with attempt_timeout, the attempt be recorded as failed, and the dispatcher stop.
func TestDispatch_SwitchingProtocolsEndsTheAttempt(t *testing.T) {
	db := storagetest.Open(t)
	var mu sync.Mutex
	arrived := 0
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		mu.Lock()
		arrived++
		mu.Unlock()
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		buf.Flush()
		<-hold // says nothing more, keeps the connection open
	}))
	t.Cleanup(func() { close(hold); srv.Close() })
	src := otaSource(t)
	src.ForwardURL, src.MaxAttempts, src.AttemptTimeout, src.MaxBackoff = srv.URL, 3, 300*time.Millisecond, time.Second
	d := receiver.NewDispatcher(receiver.DispatchConfig{Store: db, Sources: []receiver.Source{src},
		Poll: 50 * time.Millisecond, FirstBackoff: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("the dispatcher did not stop: an attempt is still blocked")
		}
	})

	accept(t, db, "evt_101", `{"id":"evt_101"}`)
	d.Wake()
	// attempt_timeout is 300 ms: the attempt must be over, and recorded, well within 3 s.
	var as []storage.Attempt
	storagetest.Eventually(t, 3*time.Second, func() error {
		var err error
		if as, err = db.Attempts(context.Background(), "ota", "evt_101"); err != nil {
			return err
		}
		if len(as) == 0 {
			return fmt.Errorf("no attempt recorded %v after the hand-off (attempt_timeout %v)", 3*time.Second, src.AttemptTimeout)
		}
		return nil
	})
}
