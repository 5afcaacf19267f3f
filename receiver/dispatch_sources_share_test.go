package receiver_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
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
