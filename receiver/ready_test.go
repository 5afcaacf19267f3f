package receiver_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
	"github.com/hookdedup/hookdedup/storage/sqlite"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// pingCounter is a real store that counts its readiness checks.
type pingCounter struct {
	receiver.Store
	pings atomic.Int64
}

func (p *pingCounter) Ping(ctx context.Context) error {
	p.pings.Add(1)
	return p.Store.Ping(ctx)
}

// TestHandler_ReadyProbesShareOneCheck floods the unauthenticated /readyz while senders
// deliver. Each readiness check commits a write on the connection intake uses: the
// probes must share checks (about one a second), every probe must still be answered 200,
// and every delivery stored.
func TestHandler_ReadyProbesShareOneCheck(t *testing.T) {
	db := storagetest.OpenPath(t, filepath.Join(t.TempDir(), "hookdedup.db"), sqlite.Options{})
	store := &pingCounter{Store: db}
	src := otaSource(t)
	e := &testEnv{db: db, src: src,
		srv: serveReceiver(t, receiver.New(receiver.Config{Sources: []receiver.Source{src}, Store: store, MaxBody: 4096}), nil)}

	start := time.Now()
	const probers, probes, senders, each = 32, 10, 4, 10
	var probed atomic.Int64
	var wg sync.WaitGroup
	for range probers {
		wg.Go(func() {
			for range probes {
				if code, body := e.ready(t); code != 200 {
					t.Errorf("readyz = %d %s, want 200", code, body)
					return
				}
				probed.Add(1)
			}
		})
	}
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				if code, a, _ := e.post(t, "ota", fmt.Sprintf("msg_probed_%d_%d", s, i), cancellation, nil); code != 200 || a.Status != "accepted" {
					t.Errorf("delivery %d/%d: %d %+v, want accepted", s, i, code, a)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)

	// A probe that comes while a check is under way waits for it, and the next check
	// starts a second after the last ended: one check a second, and one more at each end.
	want := int64(took/time.Second) + 2
	if got := store.pings.Load(); got > want {
		t.Errorf("%d probes in %v made %d readiness checks, want at most %d", probed.Load(), took.Round(time.Millisecond), got, want)
	}
	var stored int
	if err := rawDB(t, db.Path()).QueryRow(`SELECT COUNT(*) FROM deliveries`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != senders*each {
		t.Errorf("%d deliveries stored, want %d", stored, senders*each)
	}
}

// TestHandler_ReadySeesALockWithinASecond: a database that stops taking writes while no
// delivery comes (another process holds its write lock) is seen by the first probe after
// the reused answer's second, not later; once it takes writes again, the next probe
// says so at once (a not-ready answer is not reused).
func TestHandler_ReadySeesALockWithinASecond(t *testing.T) {
	e := newEnv(t, sqlite.Options{BusyTimeout: 200 * time.Millisecond})
	if code, body := e.ready(t); code != 200 {
		t.Fatalf("readyz before = %d %s", code, body)
	}
	release := holdWriteLock(t, e.db.Path(), "BEGIN EXCLUSIVE")
	time.Sleep(1100 * time.Millisecond)
	if code, body := e.ready(t); code != http.StatusServiceUnavailable {
		t.Errorf("readyz a second after the lock = %d %s, want 503", code, body)
	}
	release()
	if code, body := e.ready(t); code != 200 {
		t.Errorf("readyz once the lock ended = %d %s, want 200", code, body)
	}
}

// TestHandler_ReadyLooksAgainAfterAFailedStore: a ready answer is reused for a second
// unless a delivery failed to be stored since, a rejected one (signed, but not JSON: a
// 400, stored for the console) as much as an accepted one: the probe right after either
// failed, while another process holds the write lock, looks again and says 503.
func TestHandler_ReadyLooksAgainAfterAFailedStore(t *testing.T) {
	for _, tc := range []struct {
		name, body string
	}{{"Accepted", cancellation}, {"Rejected", `not json at all`}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sqlite.Options{BusyTimeout: 100 * time.Millisecond})
			if code, body := e.ready(t); code != 200 {
				t.Fatalf("readyz before = %d %s", code, body)
			}
			holdWriteLock(t, e.db.Path(), "BEGIN EXCLUSIVE")
			start := time.Now()
			code, a, _ := e.post(t, "ota", "msg_ready_failed", tc.body, nil)
			if code != http.StatusServiceUnavailable && code != http.StatusBadRequest {
				t.Fatalf("delivery under the lock: %d %+v", code, a)
			}
			got, body := e.ready(t)
			if time.Since(start) > 900*time.Millisecond {
				t.Skip("too slow to stay within the reuse second")
			}
			if got != http.StatusServiceUnavailable {
				t.Errorf("readyz right after a %s delivery failed to be stored = %d %s, want 503 (the ready answer is not to be reused)",
					tc.name, got, body)
			}
		})
	}
}
