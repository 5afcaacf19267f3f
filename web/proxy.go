package web

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

type ctxScheme struct{}

// TrustedProxies returns middleware that takes the client's address and scheme from the
// forwarding headers of a reverse proxy, believing them only when the peer that sent the
// request is in one of cidrs. From any other peer the headers are ignored: a client
// could write anything in them.
//
// The client is the right-most address of X-Forwarded-For that is not itself a trusted
// proxy (each proxy appends the address it saw, so the addresses right of it were
// written by proxies we trust, the ones left of it by whoever sent them). Without
// X-Forwarded-For, the for= parameters of Forwarded (RFC 7239) are read the same way.
// X-Forwarded-For is preferred because Caddy and nginx set it and pass a client's
// Forwarded header through untouched. A value that is not an address (for=unknown, an
// obfuscated name, garbage) ends the walk: the hop that wrote it is taken as the client.
//
// The middleware rewrites r.RemoteAddr to the client's address (with the port the proxy
// forwarded, or 0), so that everything behind it, the receiver and the console alike,
// stores, logs and throttles the client; and it records the scheme the client used
// (X-Forwarded-Proto, or Forwarded's proto=), which Scheme reports. Requests from other
// peers pass unchanged.
func TrustedProxies(cidrs []netip.Prefix) func(http.Handler) http.Handler {
	trusted := make([]netip.Prefix, len(cidrs))
	for i, p := range cidrs {
		trusted[i] = p.Masked()
	}
	isTrusted := func(a netip.Addr) bool {
		a = a.Unmap().WithZone("") // a prefix never contains an address with a zone
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(trusted) == 0 {
				next.ServeHTTP(w, r) // Scheme reads the connection
				return
			}
			peer, err := netip.ParseAddrPort(r.RemoteAddr)
			if err != nil || !isTrusted(peer.Addr()) {
				next.ServeHTTP(w, r)
				return
			}
			scheme := Scheme(r)
			if proto := forwardedProto(r.Header); proto != "" {
				scheme = proto
			}
			r = r.WithContext(context.WithValue(r.Context(), ctxScheme{}, scheme))
			if client, ok := forwardedClient(r.Header, isTrusted); ok {
				r.RemoteAddr = client.String()
			}
			next.ServeHTTP(w, r)
		})
	}
}

// viaTrustedProxy reports whether r came from a proxy that TrustedProxies trusts.
func viaTrustedProxy(r *http.Request) bool {
	_, ok := r.Context().Value(ctxScheme{}).(string)
	return ok
}

// HostServed reports whether the console answers r's Host, names being the host names
// it is configured to answer to (lower case, no trailing dot) besides addresses and
// localhost. A page on any site can point its own name at a private address once it is
// loaded (DNS rebinding): the browser then sends that page's requests to a console on
// loopback (the address an SSH tunnel reaches) or on a private network (a VPN's, a
// LAN's) as requests of the page's own origin, which http.CrossOriginProtection lets
// through, and the page could guess passwords from the user's own machine, or read
// /metrics. Such a request names the page's site in Host. So a request over plain HTTP
// to a loopback or private address, from a client on loopback or a private network,
// must name the console by an address, as localhost, by a name no public site can have
// (one without a dot, as the network's search domain completes it, not "ai.", a
// top-level domain; or one under .local, .lan, .internal or .home.arpa), or by one of
// names. Any name reaches the console through a trusted proxy, over TLS (whose
// certificate names the host), on a public address, or from a public one, whose page
// could reach the console as directly as the page's own site can.
func HostServed(r *http.Request, names []string) bool {
	if r.TLS != nil || viaTrustedProxy(r) {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return true
	}
	ap, err := netip.ParseAddrPort(local.String())
	if err != nil || !PrivateAddr(ap.Addr()) {
		return true
	}
	if !ap.Addr().Unmap().IsLoopback() {
		peer, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || !PrivateAddr(peer.Addr()) {
			return true
		}
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	// A name written absolute ("ai.") is never one the search domain completes: without
	// a dot of its own it is a top-level domain, which a public site can have.
	absolute := strings.HasSuffix(host, ".")
	host = strings.TrimSuffix(host, ".")
	if _, err := netip.ParseAddr(host); err == nil || host == "" || numericIPv4(host) {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || host == "localhost.localdomain" {
		return true
	}
	if (!strings.Contains(host, ".") && !absolute) || slices.ContainsFunc(privateSuffixes, func(suffix string) bool {
		return strings.HasSuffix(host, suffix)
	}) {
		return true
	}
	return slices.Contains(names, host)
}

// privateSuffixes end names that resolve on a private network alone (RFC 6762's .local,
// RFC 8375's .home.arpa, ICANN's .internal, and .lan, which no registry delegates): no
// public site can be served under them.
var privateSuffixes = []string{".local", ".home.arpa", ".internal", ".lan"}

// PrivateAddr reports whether a is loopback or on a private network: RFC 1918 and
// fc00::/7, link-local, and 100.64.0.0/10, the shared range that Tailscale's VPN hands
// out.
func PrivateAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || cgnat.Contains(a)
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// numericIPv4 reports whether host is an IPv4 address in one of the forms inet_aton
// reads besides the dotted quad (127.1, 2130706433, 0x7f.1, 0177.0.0.1), which curl and
// wget send as typed. A browser sends such an address as the dotted quad, and a name a
// page could point anywhere is never all numbers.
func numericIPv4(host string) bool {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 0, 32); err != nil || strings.HasPrefix(p, "+") {
			return false
		}
	}
	return true
}

// Scheme returns "https" when the client reached the server over TLS, directly or
// through a trusted proxy that says so (see TrustedProxies), and "http" otherwise.
func Scheme(r *http.Request) string {
	if s, ok := r.Context().Value(ctxScheme{}).(string); ok {
		return s
	}
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// forwardedClient walks the forwarded addresses from the right, past trusted proxies,
// and returns the first one that is not trusted: the client. ok is false when no
// forwarding header names an address.
func forwardedClient(h http.Header, trusted func(netip.Addr) bool) (client netip.AddrPort, ok bool) {
	hops := listValues(h.Values("X-Forwarded-For"))
	if len(hops) == 0 {
		for _, el := range forwardedElements(h) {
			if v, found := el["for"]; found {
				hops = append(hops, v)
			}
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, valid := parseHop(hops[i])
		if !valid {
			// Not an address: the hop right of it, which wrote it, is as far as we can know.
			return client, ok
		}
		client, ok = a, true
		if !trusted(a.Addr()) {
			return client, true
		}
	}
	// Every hop is a trusted proxy: the left-most is where the request started.
	return client, ok
}

// forwardedProto returns the scheme the nearest proxy reports ("http" or "https"), or
// "" when it reports none: the right-most X-Forwarded-Proto, else the right-most proto=
// of Forwarded.
func forwardedProto(h http.Header) string {
	var proto string
	if list := listValues(h.Values("X-Forwarded-Proto")); len(list) > 0 {
		proto = list[len(list)-1]
	} else {
		els := forwardedElements(h)
		for i := len(els) - 1; i >= 0 && proto == ""; i-- {
			proto = els[i]["proto"]
		}
	}
	switch strings.ToLower(proto) {
	case "https":
		return "https"
	case "http":
		return "http"
	}
	return ""
}

// listValues splits comma-separated header values into their trimmed, non-empty items,
// in order.
func listValues(values []string) []string {
	var out []string
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// forwardedElements parses the Forwarded headers (RFC 7239) into their elements, in
// order, each a map of lower-case parameter names to unquoted values.
func forwardedElements(h http.Header) []map[string]string {
	var out []map[string]string
	for _, el := range listValues(h.Values("Forwarded")) {
		params := map[string]string{}
		for pair := range strings.SplitSeq(el, ";") {
			k, v, found := strings.Cut(strings.TrimSpace(pair), "=")
			if !found {
				continue
			}
			v = strings.TrimSpace(v)
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = strings.ReplaceAll(v[1:len(v)-1], `\`, "")
			}
			params[strings.ToLower(strings.TrimSpace(k))] = v
		}
		out = append(out, params)
	}
	return out
}

// parseHop reads one forwarded address: "192.0.2.60", "192.0.2.60:4711", "2001:db8::1",
// or "[2001:db8::1]:4711"; the port is 0 when none is given.
func parseHop(s string) (netip.AddrPort, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), 0), true
}
