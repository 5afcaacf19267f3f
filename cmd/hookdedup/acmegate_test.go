package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// TestOrderGate_FiveFailuresAnHourAtMost: a domain whose orders fail, asked for at every
// second for five hours (senders retrying while its DNS points elsewhere), has an order
// fail no more than five times in any hour, Let's Encrypt's limit of failed
// validations, past which it would refuse the order after the fix as well; the waits
// grow to an hour and no further. Each wait's refusal says when the next order is made.
func TestOrderGate_FiveFailuresAnHourAtMost(t *testing.T) {
	var g orderGate
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failed := errors.New("acme: authorization error for hooks.example.com: 400 urn:ietf:params:acme:error:dns")
	var orders []time.Time
	for s := range 5 * 3600 {
		now := start.Add(time.Duration(s) * time.Second)
		if err := g.wait("hooks.example.com", now); err != nil {
			if !strings.Contains(err.Error(), "the next is made at") || !errors.Is(err, failed) {
				t.Fatalf("put off: %v; want it to say when the next order is made, and why the last failed", err)
			}
			continue
		}
		orders = append(orders, now)
		g.done("hooks.example.com", now, failed)
	}
	for i := range orders {
		n := 0
		for _, o := range orders[i:] {
			if o.Sub(orders[i]) < time.Hour {
				n++
			}
		}
		if n > 5 {
			t.Fatalf("%d orders failed in the hour from %s: %v", n, orders[i].Format(time.TimeOnly), orders)
		}
	}
	if last := orders[len(orders)-1].Sub(orders[len(orders)-2]); last != time.Hour {
		t.Errorf("the last wait %s, want an hour", last)
	}
	if len(orders) < 9 {
		t.Errorf("%d orders in five hours: %v; want one an hour once the waits reach it", len(orders), orders)
	}

	// The handshakes that waited on one order all end with its error: it counts once.
	var h orderGate
	h.done("a.example", start, failed)
	h.done("a.example", start.Add(time.Second), failed)
	if err := h.wait("a.example", start.Add(2*time.Minute)); err != nil {
		t.Errorf("one failed order seen by two handshakes, 2 minutes on: %v; want the next order made", err)
	}
	// A failure seen again within autocert's minute is its memory, not another order,
	// after a reset as well.
	h.done("a.example", start.Add(2*time.Minute), failed)
	h.reset()
	h.done("a.example", start.Add(2*time.Minute+30*time.Second), failed)
	if err := h.wait("a.example", start.Add(2*time.Minute+31*time.Second)); err != nil {
		t.Errorf("autocert's memory of a failure after a reset: %v; want no order put off", err)
	}
	// A success forgets the failures; so does reset.
	h.done("a.example", start.Add(2*time.Minute), failed)
	h.done("a.example", start.Add(2*time.Minute), nil)
	if err := h.wait("a.example", start.Add(2*time.Minute+time.Second)); err != nil {
		t.Errorf("after a success: %v", err)
	}
	h.done("a.example", start, failed)
	h.reset()
	if err := h.wait("a.example", start.Add(time.Second)); err != nil {
		t.Errorf("after reset: %v", err)
	}
}

// TestTLS_ACMEOrdersPutOff: a handshake for a domain whose order failed, while the next
// is put off, fails with the gate's error without asking the CA; the failed order is
// counted from the handshake that made it; OrderAgain (SIGHUP) lets the next handshake
// order at once.
func TestTLS_ACMEOrdersPutOff(t *testing.T) {
	setup, asked, _ := refusingCA(t)
	if _, err := setup.acmeCertificate(ecdsaHello("hooks.example.com")); err == nil {
		t.Fatal("a certificate from a CA that refuses every request")
	}
	if asked.Load() == 0 {
		t.Fatal("the first handshake did not ask the CA")
	}
	if err := setup.gate.wait("hooks.example.com", time.Now()); err == nil {
		t.Fatal("the failed order did not put off the next")
	}

	// Put off until well after autocert's own minute, which would otherwise answer
	// with its own error from memory, also without asking the CA.
	setup.gate.mu.Lock()
	f := setup.gate.failed["hooks.example.com"]
	f.n, f.last = 6, time.Now().Add(-10*time.Minute) // the next in 50 minutes
	setup.gate.failed["hooks.example.com"] = f
	setup.gate.mu.Unlock()
	before := asked.Load()
	_, err := setup.acmeCertificate(ecdsaHello("hooks.example.com"))
	if err == nil || !strings.Contains(err.Error(), "the next is made at") {
		t.Errorf("a handshake while orders are put off: %v; want the gate's error", err)
	}
	if asked.Load() != before {
		t.Errorf("a handshake while orders are put off asked the CA %d times", asked.Load()-before)
	}

	// OrderAgain lets handshakes order again; one that comes while autocert still
	// answers from memory (here: an order failed just now) does not put the next off.
	setup.gate.done("hooks.example.com", time.Now().Add(-time.Hour), nil)
	if _, err := setup.acmeCertificate(ecdsaHello("hooks.example.com")); err == nil {
		t.Fatal("a certificate from a CA that refuses every request")
	}
	if got := setup.OrderAgain(context.Background()); len(got) != 1 || got[0] != "hooks.example.com" {
		t.Errorf("OrderAgain: %v, want the domain without a certificate", got)
	}
	if err := setup.gate.wait("hooks.example.com", time.Now()); err != nil {
		t.Errorf("after OrderAgain: %v; want an order let through", err)
	}
	_, err = setup.acmeCertificate(ecdsaHello("hooks.example.com"))
	if err == nil || strings.Contains(err.Error(), "the next is made at") {
		t.Errorf("a handshake after OrderAgain: %v; want autocert's own answer", err)
	}
	if err := setup.gate.wait("hooks.example.com", time.Now()); err != nil {
		t.Errorf("autocert's answer from memory put the next order off: %v", err)
	}
	setup.gate.mu.Lock()
	at := setup.gate.failed["hooks.example.com"].last.Add(autocertMemory + time.Second)
	setup.gate.mu.Unlock()
	if wait := time.Until(at); wait < 50*time.Second || wait > autocertMemory+time.Second {
		t.Errorf("the order after OrderAgain comes in %s, want once autocert has forgotten the failure, about a minute", wait)
	}
}

// TestTLS_OrderAgainStopsWithServe: the order that a SIGHUP puts off until autocert has
// forgotten the last failure is not made once serve has stopped meanwhile (a restart
// after the SIGHUP): its listeners closed, the CA could not validate it, and the failed
// validation would count against the name's five an hour.
func TestTLS_OrderAgainStopsWithServe(t *testing.T) {
	setup, asked, _ := refusingCA(t)
	// The last order failed almost a minute ago: the next is made in a second or two.
	setup.gate.done("hooks.example.com", time.Now().Add(-autocertMemory+time.Second), errors.New("DNS points elsewhere"))
	ctx, stop := context.WithCancel(context.Background())
	if got := setup.OrderAgain(ctx); len(got) != 1 {
		t.Fatalf("OrderAgain: %v, want the domain without a certificate", got)
	}
	stop() // serve stops
	time.Sleep(4 * time.Second)
	if n := asked.Load(); n != 0 {
		t.Errorf("the CA was asked %d times after serve stopped", n)
	}
}

// refusingCA is ACME under a CA server of the test's own that refuses every request,
// for hooks.example.com, the count of the requests that reached the CA, and the log.
func refusingCA(t *testing.T) (*tlsSetup, *atomic.Int64, *lockedBuffer) {
	t.Helper()
	asked := new(atomic.Int64)
	ca := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		// A refusal the ACME client does not retry (it retries a 5xx for minutes).
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"type":"urn:ietf:params:acme:error:malformed","detail":"the CA refuses"}`))
	}))
	t.Cleanup(ca.Close)
	logger, logs := testLog(t)
	setup, err := newTLS(tlsSettings{ACMEDomains: []string{"hooks.example.com"}, ACMEDirectory: ca.URL + "/directory",
		CacheDir: filepath.Join(t.TempDir(), "acme"), Addr: "127.0.0.1:0", acmeHTTPClient: ca.Client()}, logger)
	if err != nil {
		t.Fatal(err)
	}
	return setup, asked, logs
}

// TestTLS_OrderAgainStormLoggedOnce: SIGHUPs in a row each order again, all at the
// moment autocert forgets the last failure; their failures are logged as a
// handshake's are, once a minute, not a line each.
func TestTLS_OrderAgainStormLoggedOnce(t *testing.T) {
	setup, asked, logs := refusingCA(t)
	// The last order failed a minute ago, less half a second.
	setup.gate.done("hooks.example.com", time.Now().Add(-autocertMemory+500*time.Millisecond), errors.New("DNS points elsewhere"))
	for range 5 {
		setup.OrderAgain(t.Context())
	}
	storagetest.Eventually(t, 30*time.Second, func() error {
		if asked.Load() == 0 {
			return errors.New("no order reached the CA")
		}
		return nil
	})
	time.Sleep(2 * time.Second) // the other orders, each failing as the first
	if n := strings.Count(logs.String(), "no certificate from the ACME CA"); n != 1 {
		t.Errorf("%d lines for five SIGHUPs' orders, want 1:\n%s", n, logs.String())
	}
}
