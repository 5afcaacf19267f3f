package web

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// throttleStore is what a password check asks of storage: the failures counted
// against its scopes.
type throttleStore interface {
	// LoginAttempt counts a password check as a failure of each scope and returns
	// zero, or, when a scope has to wait, counts nothing and returns until when.
	LoginAttempt(ctx context.Context, now time.Time, scopes map[string]storage.Throttle) (until time.Time, err error)
	// LoginSucceeded takes that count back: clear forgets its failures, each scope in
	// keep loses this one.
	LoginSucceeded(ctx context.Context, clear string, keep ...string) error
}

// Sign-in throttling slows guessing down without locking the real user out: failures
// count against the name at the client's address, and against the address, never
// against the name alone, so failures from one address cannot stop the right password
// from another. A name at one address gets 3 tries at once, then waits 1 s, 2 s, 4 s …
// up to 15 minutes between tries; an address gets 30 tries at once whatever the names,
// then waits the same way. Each wait runs from the last failure; a success clears the
// name's count at that address.
var (
	throttlePair = storage.Throttle{Free: 3, First: time.Second, Max: 15 * time.Minute, Forget: 24 * time.Hour}
	throttleAddr = storage.Throttle{Free: 30, First: time.Second, Max: 15 * time.Minute, Forget: time.Hour}
)

// throttle is what a password check of one name from one client counts against.
type throttle struct {
	pair, addr string // the scopes: the name at the address, and the address
	scopes     map[string]storage.Throttle
}

// throttleFor returns the throttle of a password check of name from r's client. IPv6
// clients are grouped by /64, the block one subscriber usually holds, so that a client
// cannot step to a fresh address.
func throttleFor(r *http.Request, name string) throttle {
	addr := clientAddr(r)
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		addr = p.String()
	}
	t := throttle{pair: "pair:" + addr + " " + name, addr: "addr:" + addr} // an address holds no space
	t.scopes = map[string]storage.Throttle{t.pair: throttlePair, t.addr: throttleAddr}
	return t
}

// clientAddr is the client's address without its port (see TrustedProxies).
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// throttled reserves a password check under th: if it is refused for now, it sets
// Retry-After and returns how long to wait, in words ("3 minutes"); else it returns ""
// and the check counts as a failure until LoginSucceeded takes it back.
func (s *Server) throttled(w http.ResponseWriter, r *http.Request, now time.Time, th throttle) (string, error) {
	until, err := s.throttles.LoginAttempt(r.Context(), now, th.scopes)
	if err != nil || until.IsZero() {
		return "", err
	}
	secs := int(math.Ceil(until.Sub(now).Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	if secs < 60 {
		return fmt.Sprintf("%d second%s", secs, plural(secs)), nil
	}
	mins := (secs + 59) / 60
	return fmt.Sprintf("%d minute%s", mins, plural(mins)), nil
}
