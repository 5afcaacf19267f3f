package receiver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
)

// TestDispatch_RetryAfterHonoured: a downstream that answers 429 or 503 with
// Retry-After (a date, or seconds) is left alone that long before the next attempt,
// rather than retried on the backoff's own schedule (40 ms here), which would spend the
// key's attempts while the downstream said when it would take the event; but never
// longer than max_backoff, however long it asks for (past what an int64 holds too).
func TestDispatch_RetryAfterHonoured(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		n := len(arrivals)
		mu.Unlock()
		switch n {
		case 1:
			w.Header().Set("Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", "99999999999999999999") // more seconds than an int64 holds
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	accept(t, db, "k_ra", `{"booking_id":"BK-1"}`)
	src := forwardSource(t, srv.URL, 5)
	src.MaxBackoff = 1500 * time.Millisecond
	_, stop := runDispatcher(t, db, src)
	waitState(t, db, "k_ra", storage.StateProcessed)
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 3 {
		t.Fatalf("downstream saw %d hand-offs, want 3", len(arrivals))
	}
	// The date is a whole second: it asks for 1–2 s.
	if gap := arrivals[1].Sub(arrivals[0]); gap < 900*time.Millisecond {
		t.Errorf("second hand-off %v after a 429 with Retry-After two seconds ahead; want at least a second", gap)
	}
	if gap := arrivals[2].Sub(arrivals[1]); gap < 1400*time.Millisecond || gap > 10*time.Second {
		t.Errorf("third hand-off %v after a 503 with a Retry-After of 20 digits; want max_backoff, 1.5 s", gap)
	}
}
