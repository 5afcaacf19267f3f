package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/gob"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
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
	// RememberDevice keeps a device cookie's id for the named user, who signed in with
	// it at at, and forgets those not signed in with since forgetBefore; KnownDevice
	// reports whether id is one kept for name, signed in with since since.
	RememberDevice(ctx context.Context, name, id string, at, forgetBefore time.Time) error
	KnownDevice(ctx context.Context, name, id string, since time.Time) (bool, error)
}

// Sign-in throttling slows guessing down without locking the real user out: failures
// count against the name at the client's address, and against the address, never
// against the name alone, so failures from one address cannot stop the right password
// from another. A name at one address gets 3 tries at once, then waits 1 s, 2 s, 4 s …
// up to 15 minutes between tries; an address gets 30 tries at once whatever the names,
// then waits the same way. Each wait runs from the last failure; a success clears the
// name's count at that address.
//
// Behind an SSH tunnel, or a proxy that trusted_proxies does not name, every user comes
// from one address, and anyone there could keep the address waiting for all of them.
// So a browser where a name signed in before carries a device cookie (signed, for that
// name, deviceMaxAge, its id kept by storage as a digest): a sign-in of that name from
// it counts against the name on that device alone, with the same waits, and never
// against the address. A guesser without
// the cookie cannot slow it, and with it is slowed as one name at one address is.
var (
	throttlePair = storage.Throttle{Free: 3, First: time.Second, Max: 15 * time.Minute, Forget: 24 * time.Hour}
	throttleAddr = storage.Throttle{Free: 30, First: time.Second, Max: 15 * time.Minute, Forget: time.Hour}
)

// The device cookie: which names signed in from this browser, each with an id of the
// browser of its own, so that its failures are its own.
const (
	deviceCookie  = "hookdedup_device"
	deviceMaxAge  = 90 * 24 * time.Hour
	deviceIDBytes = 16
)

// throttle is what a password check of one name from one client counts against.
type throttle struct {
	pair, addr string // the scopes: the name at the address (or its own client), and the address ("" then)
	scopes     map[string]storage.Throttle
}

// keep is the scopes a success takes its one failure back from, beside the pair's,
// which it clears.
func (t throttle) keep() []string {
	if t.addr == "" {
		return nil
	}
	return []string{t.addr}
}

// throttleFor returns the throttle of a password check of name from r's client, or,
// when own is not "", from a client of name's own: the browser of name's device cookie
// ("device:" and its id, deviceOf) or one of name's sessions at the client's address
// ("session:", its id and the address), which count alone, never against the address.
// IPv6 clients are grouped by /64, the block one subscriber usually holds, so that a
// client cannot step to a fresh address. A scope holds a session's id, a device's id,
// a name as typed (maybe a password in the wrong field) and an address: storage keeps
// it under its digest alone (storage.ThrottleKey), never as written here.
func throttleFor(r *http.Request, name, own string) throttle {
	if own != "" {
		t := throttle{pair: own + " " + name}
		t.scopes = map[string]storage.Throttle{t.pair: throttlePair}
		return t
	}
	addr := throttledAddr(r)
	t := throttle{pair: "pair:" + addr + " " + name, addr: "addr:" + addr} // an address holds no space
	t.scopes = map[string]storage.Throttle{t.pair: throttlePair, t.addr: throttleAddr}
	return t
}

// throttledAddr is the address r's client is throttled by: its own, or for IPv6 its
// /64.
func throttledAddr(r *http.Request) string {
	addr := clientAddr(r)
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		addr = p.String()
	}
	return addr
}

// sessionScope is the scope of a password check on the session sid at r's client's
// address (throttleFor's own).
func sessionScope(r *http.Request, sid string) string {
	return "session:" + sid + " " + throttledAddr(r)
}

// deviceOf returns the id of the device cookie r carries if name signed in with it,
// "" otherwise (none, not name's, expired, not one this console signed, or not one it
// gave). The cookie's signature is not enough: its keys stand in the database's
// settings, so whoever reads a backup could sign a cookie of a new id for each few
// guesses, past the address's wait; an id counts only when storage kept it at a
// sign-in (RememberDevice), and storage keeps no id that a cookie could be made of.
func (s *Server) deviceOf(r *http.Request, name string) (string, error) {
	d, err := s.devices.Get(r, cookieName(r, "__Secure-", deviceCookie))
	if err != nil || d.IsNew {
		return "", nil
	}
	for _, e := range deviceEntries(d.Values) {
		if id, who, _ := strings.Cut(e, " "); who == name {
			known, err := s.throttles.KnownDevice(r.Context(), name, id, s.now().Add(-deviceMaxAge))
			if err != nil || !known {
				return "", err
			}
			return id, nil
		}
	}
	return "", nil
}

// deviceEntries are a device cookie's names with their ids, each "id name" (an id
// holds no space), oldest sign-in first.
func deviceEntries(v map[any]any) []string {
	entries, _ := v["devices"].([]string)
	return entries
}

// The device cookie's values travel gob-encoded, which must know their type.
func init() { gob.Register([]string{}) }

// deviceNames bounds the names one device cookie speaks for: the users who share a
// browser (a front desk's), the ones who signed in last.
const deviceNames = 8

// setDevice gives the browser of r the device cookie of name, who has just signed in:
// with the device's id if it had one for name (dev), so that its count stays its own,
// or a new one, beside the names it held for others who signed in there. Storage keeps
// the id (its digest) for deviceOf, for the cookie's life from now.
func (s *Server) setDevice(w http.ResponseWriter, r *http.Request, name, dev string) error {
	if dev == "" {
		b := make([]byte, deviceIDBytes)
		rand.Read(b) // never fails (crypto/rand)
		dev = base64.RawURLEncoding.EncodeToString(b)
	}
	now := s.now()
	if err := s.throttles.RememberDevice(r.Context(), name, dev, now, now.Add(-deviceMaxAge)); err != nil {
		return err
	}
	d, _ := s.devices.New(r, cookieName(r, "__Secure-", deviceCookie))
	entries := slices.DeleteFunc(deviceEntries(d.Values), func(e string) bool {
		_, who, _ := strings.Cut(e, " ")
		return who == name
	})
	entries = append(entries, dev+" "+name)
	entries = entries[max(len(entries)-deviceNames, 0):]
	opts := *s.devices.Options
	opts.Secure = Scheme(r) == "https"
	d.Options = &opts
	// A cookie past what a browser keeps (securecookie refuses it) drops its oldest
	// names until it fits: long names, eight of them.
	for {
		d.Values = map[any]any{"devices": entries}
		err := d.Save(r, w)
		if err == nil {
			return nil
		}
		if len(entries) <= 1 {
			s.log.Warn("device cookie", logErr, err)
			return nil
		}
		entries = entries[1:]
	}
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
