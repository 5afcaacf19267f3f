package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"github.com/hookdedup/hookdedup/receiver"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/hookdedup/hookdedup/web"
)

// endpoint is one address serve listens on and the HTTP server that answers there.
type endpoint struct {
	setting string // the setting that names the address: "addr" or "console_addr"
	ln      net.Listener
	srv     *http.Server
	// tls, when set before the program runs, makes the endpoint serve HTTPS with it
	// (its certificates or GetCertificate); nil serves plain HTTP. It is kept apart
	// from srv.TLSConfig, which net/http fills in for HTTP/2 even on plain HTTP.
	tls *tls.Config
}

// newEndpoint listens on addr and builds the server that is to answer there, with the
// configured timeouts; handle gives it its handler. It serves plain HTTP unless its tls
// is set before the program runs: serve and url follow that one field, so TLS is
// attached to either address, or both, in one place.
// maxHeaderBytes is net/http's bound on a request's headers: twice
// receiver.MaxHeaderBytes, so that intake answers a delivery somewhat over its bound
// itself, in JSON, and records it, while net/http refuses more in plain text. No more:
// every connection still sending its headers holds what it sent in memory, until
// read_header_timeout, and at net/http's own default (1 MiB) 300 such connections took
// serve's memory from 28 MB to 350 MB.
const maxHeaderBytes = 2 * receiver.MaxHeaderBytes

func newEndpoint(setting, addr string, cfg config, log *slog.Logger) (*endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", setting, addr, err)
	}
	return &endpoint{setting: setting, ln: ln, srv: &http.Server{
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          stdlog.New(serverErrors{log}, "", 0),
		ConnState:         h2HeaderDeadline(cfg.ReadHeaderTimeout),
	}}, nil
}

// handle makes h the endpoint's handler, behind the trusted-proxy rules on its address,
// every answer with the security headers (web.Baseline), net/http's own included.
func (e *endpoint) handle(h http.Handler, cfg config) {
	h = web.Baseline(h)
	// Behind a trusted reverse proxy, the receiver and the console alike see the
	// client's address and scheme. The proxy reaches addr; console_addr is reached
	// directly, through an SSH tunnel or a VPN, and believes no forwarding header: a
	// tunnel's connections come from 127.0.0.1, the address a proxy on the same machine
	// is trusted by, and a page in the user's browser (DNS rebinding) could then name
	// any client address per guess, and pass for a proxy (web.HostServed).
	if e.setting != "console_addr" {
		h = web.TrustedProxies(cfg.TrustedProxies)(h)
	}
	e.srv.Handler = h
}

// h2HeaderDeadline bounds an HTTP/2 connection's wait for its first request's headers by
// read_header_timeout, as net/http bounds HTTP/1.1's. Its HTTP/2 server sets no read
// deadline until a request's headers are complete, so a client that opens a header block
// and never ends it (or sends no request at all) would hold the connection until
// idle_timeout. The deadline is set when the server, having read the preface, turns the
// connection idle, and lifted when the first request begins; the HTTP/2 server then sets
// its own per request (read_timeout).
func h2HeaderDeadline(d time.Duration) func(net.Conn, http.ConnState) {
	var mu sync.Mutex
	// A TLS connection seen idle: true for HTTP/2 until its first request. HTTP/1.1's go
	// idle after every request: each is looked at once, not at every turn.
	armed := map[net.Conn]bool{}
	return func(c net.Conn, state http.ConnState) {
		tc, ok := c.(*tls.Conn)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch state {
		case http.StateIdle:
			if _, seen := armed[c]; !seen {
				h2 := tc.ConnectionState().NegotiatedProtocol == "h2"
				armed[c] = h2
				if h2 {
					tc.SetReadDeadline(time.Now().Add(d))
				}
			}
		case http.StateActive:
			if armed[c] {
				armed[c] = false
				tc.SetReadDeadline(time.Time{})
			}
		case http.StateClosed, http.StateHijacked:
			delete(armed, c)
		}
	}
}

// serverErrors is what net/http has to say about connections it could not serve, as
// log lines: a handshake that failed is anyone's doing (a scanner, a client that hung
// up, a name without a certificate) and comes at the rate they choose, so it is a debug
// line; the rest are warnings.
type serverErrors struct{ log *slog.Logger }

func (e serverErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	if strings.Contains(msg, "TLS handshake error") {
		e.log.Debug(msg)
	} else {
		e.log.Warn(msg)
	}
	return len(p), nil
}

// serve answers on the endpoint's listener until its server shuts down.
func (e *endpoint) serve() error {
	if e.tls != nil {
		e.srv.TLSConfig = e.tls
		return e.srv.ServeTLS(e.ln, "", "") // the certificates are in TLSConfig
	}
	return e.srv.Serve(e.ln)
}

// url is the endpoint's base URL as bound (the port chosen for ":0"), no trailing slash.
func (e *endpoint) url() string {
	scheme := "http"
	if e.tls != nil {
		scheme = "https"
	}
	return scheme + "://" + e.ln.Addr().String()
}

// loopback reports whether a listener's address can be reached from this machine only:
// 127.0.0.0/8 or ::1 ("localhost" binds one of them). An unspecified address (":8080",
// "0.0.0.0:8080") listens on every interface.
func loopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// privateAddr reports whether a listener's address is loopback or on a private network
// (web.PrivateAddr). An unspecified address (every interface) is not.
func privateAddr(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	return ok && web.PrivateAddr(ip)
}

// routes says what each address serves. Without a console address (console is nil) the
// public one serves everything: the webhooks, health and readiness, the console, the
// JSON API and /metrics (behind the metrics token, or off without one, since anyone who
// reaches the webhooks reaches it). With one, the public address serves only the
// webhooks, health and readiness, and a JSON 404 for anything else; the console address
// serves the console, the API, /metrics (open unless a token is set: it is private by
// construction) and health and readiness, for a probe that watches it.
//
// intake holds the receiver's routes (its Register); consoleSrv is the console and the
// API; metrics is the Prometheus handler.
func routes(intake http.Handler, consoleSrv *web.Server, metrics http.Handler, cfg config) (public, console http.Handler) {
	health := func(mux *http.ServeMux) {
		mux.Handle("GET /healthz", intake)
		mux.Handle("GET /readyz", intake)
	}
	pub := http.NewServeMux()
	// Every method: POST is a delivery, the rest get the receiver's 405 in JSON. A path
	// under /webhooks that names no source (/webhooks/ota/, a provider's URL with a
	// slash too many) gets the receiver's JSON 404 naming it, a POST counted as a
	// rejection, rather than the console's page.
	pub.Handle("/webhooks/{source}", intake)
	pub.Handle("/webhooks/", intake)
	pub.Handle("/webhooks", intake)
	health(pub)
	if cfg.ConsoleAddr == "" {
		consoleSrv.Register(pub)
		pub.Handle("GET /metrics", metricsRoute(metrics, cfg.MetricsToken, false, nil))
		return pub, nil
	}
	pub.HandleFunc("/", jsonNotFound)

	priv := http.NewServeMux()
	health(priv)
	consoleSrv.Register(priv)
	priv.Handle("GET /metrics", metricsRoute(metrics, cfg.MetricsToken, true, cfg.ConsoleNames))
	return asWritten(pub), priv
}

// asWritten serves mux's routes to the paths they name as written, and the JSON 404 to
// anything else. An http.ServeMux answers a path that is not in its clean form
// (//login, /./healthz, /static/../login) with a redirect to the clean one, in HTML, and
// a CONNECT with a 404 in plain text, past every route: on the public address, which
// promises its JSON 404 for whatever it does not serve, a client would be sent on to
// another path instead. Paths under /webhooks are the receiver's to answer first
// (CleanPaths).
func asWritten(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.EscapedPath(); r.Method == http.MethodConnect || receiver.CleanPath(p) != p {
			jsonNotFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// metricsRoute is /metrics as served: behind token when one is set; otherwise open on a
// private address, to the names the console answers to there (web.HostServed with
// names, console_names: a page rebound to 127.0.0.1 or a VPN's address would read the
// sources' names and counts), and off (404) on a shared one.
func metricsRoute(metrics http.Handler, token string, private bool, names []string) http.Handler {
	switch {
	case token != "":
		return requireBearer(token, metrics)
	case private:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !web.HostServed(r, names) {
				writeJSONError(w, http.StatusMisdirectedRequest, "not this server's name: use its address, localhost, or a name in console_names")
				return
			}
			metrics.ServeHTTP(w, r)
		})
	default:
		return http.HandlerFunc(jsonNotFound)
	}
}

// metricsMode says, for the start-up log line, how /metrics is served.
func metricsMode(cfg config) string {
	switch {
	case cfg.MetricsToken != "":
		return "bearer token"
	case cfg.ConsoleAddr != "":
		return "open on console_addr"
	default:
		return "off (set metrics_token or console_addr)"
	}
}

// requireBearer serves next only to requests whose Authorization header is
// "Bearer <token>". The comparison is of SHA-256 digests in constant time, so that
// neither the token's bytes nor its length show in the answer's timing.
func requireBearer(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookdedup metrics"`)
			writeJSONError(w, http.StatusUnauthorized, `missing or wrong bearer token: send "Authorization: Bearer" and the metrics_token`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// jsonNotFound answers what an address does not serve, in JSON: webhook clients and
// scrapers read JSON, and the public address never shows the console's pages.
func jsonNotFound(w http.ResponseWriter, r *http.Request) {
	writeJSONError(w, http.StatusNotFound, "not found")
}

// writeJSONError writes {"error": msg} with code.
func writeJSONError(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg}) // a string only: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
