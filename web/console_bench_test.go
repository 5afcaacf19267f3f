package web_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// BenchmarkConsole_KeyWithManyDeliveries times a delivery's page and the API's view of
// its key when the key has 20,000 deliveries (a provider that reuses one event id): the
// page lists the first KeyDeliveriesShown, so its cost does not grow with the key.
func BenchmarkConsole_KeyWithManyDeliveries(b *testing.B) {
	e := newConsoleEnv(b)
	const n = 20000
	body := []byte(`{"event_id":"evt_storm","booking_id":"BK-1","status":"cancelled","refund":{"amount":"10.00"}}`)
	var wg sync.WaitGroup
	var last storage.Delivery
	var mu sync.Mutex
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				d := &storage.Delivery{Source: "ota", Key: "evt_storm", KeyMethod: "event_id", PayloadHash: "h",
					ContentType: "application/json", Body: body}
				if err := e.db.Record(context.Background(), d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if d.ID > last.ID {
					last = *d
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	c := e.as(b, "viewer")
	path := fmt.Sprintf("/events/%d", last.ID)
	b.ResetTimer()
	for b.Loop() {
		if code, _ := c.get(path); code != http.StatusOK {
			b.Fatalf("GET %s = %d", path, code)
		}
	}
}
