package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/static"
	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
	"github.com/hookdedup/hookdedup/web"
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

// BenchmarkLedgerPage times the ledger page, its first 500 rows and its totals over 30
// days, and the API's ledger (its first 500 rows), on the database that storage's
// BenchmarkLedger fills (5 M deliveries, 400 properties, three currencies), named by
// HOOKDEDUP_LEDGER_DB; it is skipped without one:
//
//	HOOKDEDUP_LEDGER_DB=/tmp/ledger-5m.db go test -run '^$' -bench '^BenchmarkLedger$' ./storage/
//	HOOKDEDUP_LEDGER_DB=/tmp/ledger-5m.db go test -run '^$' -bench '^BenchmarkLedgerPage$' ./web/
func BenchmarkLedgerPage(b *testing.B) {
	path := os.Getenv("HOOKDEDUP_LEDGER_DB")
	if path == "" {
		b.Skip("set HOOKDEDUP_LEDGER_DB to the database storage's BenchmarkLedger filled")
	}
	ctx := context.Background()
	db := storagetest.OpenPath(b, path, sqlite.Options{})
	if _, err := db.UserByName(ctx, storage.RoleViewer); errors.Is(err, storage.ErrNotFound) {
		storagetest.CreateUser(b, db, storage.RoleViewer, storage.RoleViewer, consolePassword)
	}
	tok, _, err := db.CreateToken(ctx, storage.RoleViewer, "bench", "bench")
	if err != nil {
		b.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
	s, err := web.New(ctx, web.Config{Store: db, Static: static.FS, Now: now, BcryptCost: bcrypt.MinCost,
		Sources: []web.Source{{Name: "ota"}, {Name: "psp"}, {Name: "pms"}}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	b.Cleanup(srv.Close)
	c := (&consoleEnv{db: db, srv: srv}).client(b).login(storage.RoleViewer)
	b.Run("Page", func(b *testing.B) {
		for b.Loop() {
			if code, _ := c.get("/ledger"); code != http.StatusOK {
				b.Fatalf("GET /ledger = %d", code)
			}
		}
	})
	b.Run("API", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/ledger", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("GET /api/v1/ledger = %d", resp.StatusCode)
			}
		}
	})
}
