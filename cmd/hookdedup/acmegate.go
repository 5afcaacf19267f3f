package main

import (
	"fmt"
	"sync"
	"time"
)

// orderGate spaces out the orders for a domain whose last one failed. autocert forgets a
// failed order after a minute (autocertMemory), and the next handshake for the domain
// orders again: while its DNS records point elsewhere, senders retrying their webhooks
// would have an order fail each minute, and Let's Encrypt allows 5 failed validations
// of a name an hour before it refuses every order for it, the one after the fix
// included. After n failures in a row the next order waits 2^n minutes, an hour at
// most: at most five fail in any hour. A success forgets the failures; so does reset
// (SIGHUP), for an operator who has just put the DNS right.
type orderGate struct {
	mu     sync.Mutex
	failed map[string]gateFailure
}

// gateFailure is a domain's run of failed orders: how many (0 after a reset), when the
// last ended and its error.
type gateFailure struct {
	n    int
	last time.Time
	err  error
}

// autocertMemory is how long autocert answers a domain's handshakes with the error of
// its failed order, without ordering again (its createCertRetryAfter).
const autocertMemory = time.Minute

// orderWaitMax bounds the wait between two orders for a domain.
const orderWaitMax = time.Hour

// orderWait is the wait after n failed orders in a row.
func orderWait(n int) time.Duration {
	if n >= 6 { // 2^6 minutes is past the hour
		return orderWaitMax
	}
	return time.Minute << n
}

// wait returns why no order for domain may be made at now, or nil when one may.
func (g *orderGate) wait(domain string, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	f, ok := g.failed[domain]
	if !ok || f.n == 0 {
		return nil
	}
	next := f.last.Add(orderWait(f.n))
	if !now.Before(next) {
		return nil
	}
	return fmt.Errorf("no certificate for %s: %d orders in a row failed, the last with: %w; the next is made at %s (a SIGHUP has it made a minute after the last at the earliest)",
		domain, f.n, f.err, next.UTC().Format(time.RFC3339))
}

// done notes that a handshake for domain that may have ordered ended at at with err
// (nil forgets the failures). An error within autocertMemory of the last failure is
// autocert's memory of it, no order: the handshakes that waited on one order all end
// with its error, and those after it for a minute.
func (g *orderGate) done(domain string, at time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		delete(g.failed, domain)
		return
	}
	f, ok := g.failed[domain]
	if ok && at.Before(f.last.Add(autocertMemory)) {
		return
	}
	f.n++
	f.last, f.err = at, err
	if g.failed == nil {
		g.failed = map[string]gateFailure{}
	}
	g.failed[domain] = f
}

// reset lets every domain order again, and returns when each domain whose last order
// failed can: once autocert has forgotten that failure.
func (g *orderGate) reset() map[string]time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	at := map[string]time.Time{}
	for d, f := range g.failed {
		f.n = 0
		g.failed[d] = f
		at[d] = f.last.Add(autocertMemory + time.Second)
	}
	return at
}
