package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/gorilla/sessions"
	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// Store is everything the console and the API ask of storage: the sum of the small
// interfaces each feature declares where it uses them (deliveryStore in events.go,
// keyStore in keys.go, statsStore in dashboard.go, auditStore in audit.go, userStore
// in users.go, sessionStore in auth.go, throttleStore in throttle.go, tokenStore in
// account.go, suspectStore in suspects.go). Each storage engine satisfies it.
type Store interface {
	deliveryStore
	keyStore
	statsStore
	auditStore
	userStore
	sessionStore
	throttleStore
	tokenStore
	alertStore
	bulkStore
	suspectStore
}

// Config wires a Server.
type Config struct {
	Store   Store
	Sources []Source
	// Events, if set, returns the events intake keys in a delivery of body to source,
	// each on its own (the payload field of a form, the items of a batch), or why intake
	// would refuse the body first; the key lab derives each. Unset: the body is the one
	// event.
	Events func(source string, h http.Header, body []byte) ([][]byte, error)
	// MaxBody is intake's limit on a delivery's body (max_body): the key lab says that
	// intake refuses a longer payload (413) rather than key it. 0: no limit but the lab's.
	MaxBody int64
	// Derive returns the key a payload gets from source, for the key lab. On an error
	// the returned Derivation may still hold what was found (fields, payload hash).
	Derive func(source string, h http.Header, body []byte) (storage.Derivation, error)
	// Probe, if set, describes what a delivery of body to source would be checked
	// against, for the key lab to say what it would be flagged as (the store's
	// WouldFlag, or its first delivery's payload and money were it a duplicate).
	Probe func(source string, h http.Header, body []byte) (storage.Probe, error)
	// RevealSecret returns the generated secret of a source (admins only, audited).
	RevealSecret func(ctx context.Context, source string) (string, error)
	// Wake, if set, is called after a key is reprocessed, to wake the dispatcher.
	Wake func()
	// StuckAfter: a key processing for longer is stuck. Default 10m.
	StuckAfter time.Duration
	// Static holds style.css, app.js and icon.svg (static.FS).
	Static fs.FS
	Logger *slog.Logger
	// Location is the time zone times are shown in; default time.Local.
	Location *time.Location
	Now      func() time.Time
	// IdleTimeout and AbsoluteTimeout end a session after that long without a request,
	// or that long after signing in. Defaults 2h and 12h.
	IdleTimeout, AbsoluteTimeout time.Duration
	// BcryptCost hashes the passwords of users added in the console; default
	// bcrypt.DefaultCost. Tests lower it.
	BcryptCost int
	// ClockSkew, if set, returns the median of signed time minus time of receipt of
	// the last hour's authentic deliveries of timestamped schemes (positive: the
	// senders' clocks are ahead), and how many there were. The dashboard warns when it
	// is more than a minute either way.
	ClockSkew func() (median time.Duration, n int)
	// AlertRules and AlertChannels are shown on the alerts page; AlertsChanged, if set,
	// is called after an alert is resolved by hand, so that its notifications go now.
	AlertRules    []AlertRule
	AlertChannels []AlertChannel
	AlertsChanged func()
	// ApprovalThreshold: a bulk reprocess whose money in a currency is above its
	// threshold waits for a second operator's approval; a reprocess of keys named one
	// by one (keys page, event page, POST /api/v1/release) above it is refused.
	ApprovalThreshold storage.ApprovalThresholds
	// ConsoleNames are the host names the console answers to over plain HTTP on a
	// loopback or private address, besides the ones HostServed always takes.
	ConsoleNames []string
}

// Server serves the console.
type Server struct {
	events    deliveryStore
	keys      keyStore
	stats     statsStore
	audit     auditStore
	users     userStore
	sessions  sessionStore
	throttles throttleStore
	tokens    tokenStore
	suspects  suspectStore
	sources   []Source
	eventsOf  func(string, http.Header, []byte) ([][]byte, error)
	maxBody   int64
	derive    func(string, http.Header, []byte) (storage.Derivation, error)
	probe     func(string, http.Header, []byte) (storage.Probe, error)
	reveal    func(context.Context, string) (string, error)
	wake      func()
	stuck     time.Duration
	static    fs.FS
	assets    map[string]string // file name → content hash
	log       *slog.Logger
	loc       *time.Location
	now       func() time.Time
	idle      time.Duration
	absolute  time.Duration
	cookies   *sessions.CookieStore
	devices   *sessions.CookieStore // the device cookie (throttle.go)
	cop       *http.CrossOriginProtection
	cost      int
	clockSkew func() (time.Duration, int)
	// alerts: the alerts page (alerts.go).
	alerts        alertStore
	alertRules    []AlertRule
	alertChannels []AlertChannel
	alertsChanged func()
	// dummyHash is compared against when a user does not exist, so that a wrong name
	// costs the same time as a wrong password.
	dummyHash []byte

	bulk       bulkStore // bulk actions: bulk.go
	thresholds storage.ApprovalThresholds
	names      []string // HostServed's: lower case, no trailing dot

	// stopping ends at EndLongResponses: the responses that may outlast the HTTP
	// server's write timeout watch it (untilStop).
	stopping context.Context
	stop     context.CancelFunc
}

// New returns a Server for cfg. It reads (creating on first start) the session keys
// kept in the database's settings.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Static == nil {
		return nil, errors.New("console: Store and Static are required")
	}
	s := &Server{
		events: cfg.Store, keys: cfg.Store, stats: cfg.Store, audit: cfg.Store, users: cfg.Store,
		sessions: cfg.Store, throttles: cfg.Store, tokens: cfg.Store, suspects: cfg.Store, sources: cfg.Sources, derive: cfg.Derive, reveal: cfg.RevealSecret, wake: cfg.Wake,
		stuck: cfg.StuckAfter, static: cfg.Static, log: cfg.Logger, loc: cfg.Location, now: cfg.Now,
		idle: cfg.IdleTimeout, absolute: cfg.AbsoluteTimeout, assets: map[string]string{}, cost: cfg.BcryptCost,
		clockSkew: cfg.ClockSkew, probe: cfg.Probe, eventsOf: cfg.Events, maxBody: cfg.MaxBody,
		alerts: cfg.Store, alertRules: cfg.AlertRules, alertChannels: cfg.AlertChannels, alertsChanged: cfg.AlertsChanged,
	}
	if s.alertsChanged == nil {
		s.alertsChanged = func() {}
	}
	s.bulk, s.thresholds = cfg.Store, cfg.ApprovalThreshold
	for _, n := range cfg.ConsoleNames {
		s.names = append(s.names, strings.ToLower(strings.TrimSuffix(n, ".")))
	}
	s.stopping, s.stop = context.WithCancel(context.Background())
	if s.stuck <= 0 {
		s.stuck = 10 * time.Minute
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With(logComponent, "console")
	if s.loc == nil {
		s.loc = time.Local
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.idle <= 0 {
		s.idle = 2 * time.Hour
	}
	if s.absolute <= 0 {
		s.absolute = 12 * time.Hour
	}
	if s.eventsOf == nil {
		s.eventsOf = func(_ string, _ http.Header, body []byte) ([][]byte, error) { return [][]byte{body}, nil }
	}
	if s.derive == nil {
		s.derive = func(string, http.Header, []byte) (storage.Derivation, error) {
			return storage.Derivation{}, errors.New("key derivation is not available")
		}
	}
	if s.cost == 0 {
		s.cost = bcrypt.DefaultCost
	}
	var err error
	if s.dummyHash, err = bcrypt.GenerateFromPassword([]byte("not a password"), s.cost); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if s.wake == nil {
		s.wake = func() {}
	}
	for _, name := range []string{"style.css", "app.js", "icon.svg"} {
		b, err := fs.ReadFile(s.static, name)
		if err != nil {
			return nil, fmt.Errorf("console: static %s: %w", name, err)
		}
		sum := sha256.Sum256(b)
		s.assets[name] = hex.EncodeToString(sum[:6])
	}
	if s.cookies, s.devices, err = s.cookieStore(ctx); err != nil {
		return nil, err
	}
	s.cop = http.NewCrossOriginProtection()
	s.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, r, http.StatusForbidden, "Request refused",
			"This form was sent from another site. Reload the console and try again.")
	}))
	return s, nil
}

// EndLongResponses ends the responses in progress that may outlast the HTTP server's
// write timeout, and any that begins after: the CSV export of the events, which lifts
// that timeout for up to 30 minutes. Call it when the server begins to stop, which
// otherwise waits for such an export as long as it lasts. An export ended so is cut
// off, its connection closed, so that the browser reports the download as failed
// rather than keep part of the export as the whole.
func (s *Server) EndLongResponses() { s.stop() }

// errStopping is why untilStop's context ends at EndLongResponses.
var errStopping = errors.New("the server is stopping")

// untilStop returns r's context, ended also by EndLongResponses, which then sets w's
// write deadline to now as well, so that a write waiting on a client that does not
// read returns at once. Call done before the handler returns: w is not touched after.
func (s *Server) untilStop(w http.ResponseWriter, r *http.Request) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	var mu sync.Mutex
	finished := false
	stop := context.AfterFunc(s.stopping, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now())
			cancel(errStopping)
		}
	})
	return ctx, func() {
		stop()
		mu.Lock()
		finished = true
		mu.Unlock()
		cancel(nil)
	}
}

// Register adds the console's routes, and the JSON API's, to mux. The whole URL
// surface of the console reads here.
func (s *Server) Register(mux *http.ServeMux) {
	const (
		viewer   = storage.RoleViewer
		operator = storage.RoleOperator
		admin    = storage.RoleAdmin
	)
	mux.Handle("GET /static/{file}", s.protect(http.HandlerFunc(s.handleStatic)))
	mux.Handle("GET /login", s.public(s.handleLoginForm))
	mux.Handle("POST /login", passwordForm(s.public(s.handleLogin)))
	mux.Handle("POST /logout", s.public(s.handleLogout))

	mux.Handle("GET /{$}", s.requireRole(viewer, s.handleDashboard))
	mux.Handle("GET /events", s.requireRole(viewer, s.handleEvents))
	mux.Handle("GET /events.csv", s.requireRole(viewer, s.handleEventsCSV))
	mux.Handle("GET /events/{id}", s.requireRole(viewer, s.handleEvent))
	mux.Handle("GET /keys", s.requireRole(viewer, s.handleKeys))
	mux.Handle("POST /keys/release", s.requireRole(operator, s.handleRelease))
	mux.Handle("GET /suspects", s.requireRole(viewer, s.handleSuspects))
	mux.Handle("POST /suspects/{id}/review", s.requireRole(operator, s.handleReview))
	mux.Handle("GET /ledger", s.requireRole(viewer, s.handleLedger))
	mux.Handle("GET /ledger.csv", s.requireRole(viewer, s.handleLedgerCSV))
	mux.Handle("GET /lab", s.requireRole(viewer, s.handleLab))
	mux.Handle("POST /lab", s.requireRole(viewer, s.handleLab))
	mux.Handle("GET /audit", s.requireRole(viewer, s.handleAudit))
	mux.Handle("GET /alerts", s.requireRole(viewer, s.handleAlerts))
	mux.Handle("POST /alerts/{id}/acknowledge", s.requireRole(operator, s.handleAlertAction("acknowledge")))
	mux.Handle("POST /alerts/{id}/resolve", s.requireRole(operator, s.handleAlertAction("resolve")))
	mux.Handle("GET /account", s.requireRole(viewer, s.handleAccount))
	mux.Handle("GET /account/password", s.choosingPassword(s.handlePasswordPage))
	mux.Handle("POST /account/password", passwordForm(s.choosingPassword(s.handleAccountPassword)))
	mux.Handle("POST /account/sessions/end", s.requireRole(viewer, s.handleEndMySessions))
	mux.Handle("POST /account/tokens", s.requireRole(viewer, s.handleNewToken))
	mux.Handle("POST /account/tokens/revoke", s.requireRole(viewer, s.handleRevokeToken))
	mux.Handle("GET /users", s.requireRole(admin, s.handleUsers))
	mux.Handle("POST /users", s.requireRole(admin, s.handleAddUser))
	mux.Handle("POST /users/role", s.requireRole(admin, s.handleUserRole))
	mux.Handle("POST /users/password", s.requireRole(admin, s.handleUserPassword))
	mux.Handle("POST /users/sessions/end", s.requireRole(admin, s.handleEndUserSessions))
	mux.Handle("POST /users/tokens/revoke", s.requireRole(admin, s.handleRevokeUserTokens))
	mux.Handle("POST /users/remove", s.requireRole(admin, s.handleRemoveUser))
	mux.Handle("GET /bulk", s.requireRole(viewer, s.handleBulk))
	mux.Handle("POST /bulk", s.requireRole(operator, s.handleBulkPreview))
	mux.Handle("GET /bulk/pending", s.requireRole(viewer, s.handleBulkPending))
	mux.Handle("GET /bulk/{id}", s.requireRole(viewer, s.handleBulkAction))
	mux.Handle("POST /bulk/{id}/start", s.requireRole(operator, s.handleBulkStep("start")))
	mux.Handle("POST /bulk/{id}/cancel", s.requireRole(operator, s.handleBulkStep("cancel")))
	mux.Handle("POST /bulk/{id}/approve", s.requireRole(operator, s.handleBulkStep("approve")))
	mux.Handle("POST /bulk/{id}/refuse", s.requireRole(operator, s.handleBulkStep("refuse")))
	mux.Handle("GET /sources", s.requireRole(admin, s.handleSources))
	mux.Handle("POST /sources/{name}/reveal", s.requireRole(admin, s.handleReveal))
	// Anything else: a page that says so, for every method (a path-only pattern, so
	// that the more specific patterns of the receiver and the API keep theirs).
	mux.Handle("/", s.public(func(w http.ResponseWriter, r *http.Request) error { return errNotFound }))
	s.registerAPI(mux)
}

// Handler returns a mux serving the console alone (tests, or mounting elsewhere).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.Register(mux)
	return mux
}

// handlerFunc is a console handler: it returns an error instead of writing one.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// singleValued refuses a request whose query gives a parameter more than once, before h
// reads it: every parameter of the console's pages and of the API takes one value, and
// h reads the first, so a second would be dropped without a word (source=ota&source=pms
// would list ota's deliveries alone, as if pms had none).
func singleValued(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		for _, name := range slices.Sorted(maps.Keys(q)) {
			if n := len(q[name]); n > 1 {
				return Errorf(http.StatusBadRequest, "%s: given %d times; it takes one value", name, n)
			}
		}
		return h(w, r)
	}
}

// maxFormBytes bounds the body of a console form: the largest is the key lab's, whose
// payload is refused past 1 MiB, and which form encoding can make three times as long.
// Without it, net/http would hold up to 32 MiB of a form's fields in memory for anyone
// with a session, or a session's cookie.
const maxFormBytes = 4 << 20

// maxPasswordFormBytes bounds the body of a form that carries a password (sign-in, a
// new password): a few short fields, sent by whoever asks for the sign-in page, or
// checked against a bcrypt hash.
const maxPasswordFormBytes = 16 << 10

// passwordForm bounds the body of h's requests to maxPasswordFormBytes before anything
// reads it: a bound set in h itself would come too late for a signed-in user's form,
// which the CSRF check has read by then under maxFormBytes.
func passwordForm(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxPasswordFormBytes)
		h.ServeHTTP(w, r)
	})
}

// hstsMaxAge is how long a browser that reached the console over HTTPS keeps to HTTPS
// for its host: a year, so that a link or a typed name never goes out in the clear, where
// a sign-in page could be put in the console's place.
const hstsMaxAge = "max-age=31536000"

// consoleCSP lets the console's pages load the console's own files and nothing else, be
// framed by no page, and send their forms only to the console.
const consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// securityHeaders sets the headers every answer of the console and of the API carries:
// csp and referrer as the answer's kind asks, nosniff and no framing for all, and over
// HTTPS the same Strict-Transport-Security, as both are served on one host name and a
// browser that reached either in the clear would reach the other so.
func securityHeaders(hd http.Header, r *http.Request, csp, referrer string) {
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", referrer)
	if Scheme(r) == "https" {
		hd.Set("Strict-Transport-Security", hstsMaxAge)
	}
}

// Baseline sets, before h runs, the headers every answer of an address carries: an API
// answer's (nosniff, no framing, a policy that loads nothing, no referrer, and over HTTPS
// Strict-Transport-Security). A handler that sets its own keeps them; the baseline is
// for the answers no handler of the program's writes: the redirect net/http's ServeMux
// makes of a path not in its clean form (//events, /./login) or of a subtree's root
// without its slash, a small HTML page quoting the path, and its 404s and 405s. It reads
// the scheme as Scheme does, so it goes inside TrustedProxies. Its values are made once,
// as it runs before every delivery.
func Baseline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["Content-Security-Policy"] = baselineCSP
		hd["X-Content-Type-Options"] = baselineNosniff
		hd["X-Frame-Options"] = baselineFrame
		hd["Referrer-Policy"] = baselineReferrer
		if Scheme(r) == "https" {
			hd["Strict-Transport-Security"] = baselineHSTS
		}
		h.ServeHTTP(w, r)
	})
}

var (
	baselineCSP      = []string{apiCSP}
	baselineNosniff  = []string{"nosniff"}
	baselineFrame    = []string{"DENY"}
	baselineReferrer = []string{"no-referrer"}
	baselineHSTS     = []string{hstsMaxAge}
)

// protect refuses a request for a host name the console does not answer to
// (HostServed), adds the console's security headers, refuses cross-origin unsafe
// requests and bounds the body of the others.
func (s *Server) protect(h http.Handler) http.Handler {
	h = s.cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header(), r, consoleCSP, "same-origin")
		if !HostServed(r, s.names) {
			s.renderError(w, r, http.StatusMisdirectedRequest, "Not this console's name",
				"On a loopback or private address this console answers plain HTTP only to an address "+
					"(127.0.0.1, [::1], 10.8.0.1), localhost, a name without a dot (not even a last one: not ai.) or under .local, .lan, "+
					".internal or .home.arpa, and the names in console_names, not to the name this page was "+
					"reached by ("+r.Host+"). Add that name to console_names if it is this console's. A reverse "+
					"proxy in front of it must pass such a name as Host, or, on addr, be listed in trusted_proxies.")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if r.ContentLength > maxFormBytes {
				s.tooLarge(w, r, maxFormBytes)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		}
		h.ServeHTTP(w, r)
	})
}

// formRead parses r's form and says whether it could; when it could not because the
// body is over its bound (protect's, or a smaller one of the handler's), it answers 413.
// Read by PostFormValue, which drops the error, such a form would be one without its
// fields: refused as if it lacked its CSRF token, or, the token sent in a header,
// handed to the handler empty. Other faults of a form are left to whoever reads its
// fields.
func (s *Server) formRead(w http.ResponseWriter, r *http.Request) bool {
	err := r.ParseForm()
	if err == nil {
		if err = r.ParseMultipartForm(maxFormBytes); errors.Is(err, http.ErrNotMultipart) {
			err = nil
		}
	}
	if over, ok := errors.AsType[*http.MaxBytesError](err); ok {
		s.tooLarge(w, r, over.Limit)
		return false
	}
	return true
}

// tooLarge answers 413 to a request whose body is over limit bytes.
func (s *Server) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	s.renderError(w, r, http.StatusRequestEntityTooLarge, "Request too large",
		"The request's body is over the console's limit of "+sizeText(limit)+": nothing was done.")
}

// render writes a templ component with status code.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return fmt.Errorf("render %s: %w", r.URL.Path, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, err := w.Write(buf.Bytes())
	return err
}

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, code int, title, msg string) {
	p := s.page(r, title, "")
	v := views.ErrorView(views.ErrorPage{Page: p, Code: code, Title: title, Message: msg})
	if err := s.render(w, r, code, v); err != nil {
		s.log.Error("render error page", logErr, err)
	}
}

// page returns the frame's view model for the request's user.
func (s *Server) page(r *http.Request, title, nav string) views.Page {
	p := views.Page{
		Title: title, Nav: nav,
		CSS:  s.assetURL("style.css"),
		JS:   s.assetURL("app.js"),
		Icon: s.assetURL("icon.svg"),
	}
	if st, ok := r.Context().Value(ctxState{}).(*requestState); ok {
		p.User, p.Role = st.user.Name, st.user.Role
		p.IsOperator, p.IsAdmin = Allowed(st.user.Role, storage.RoleOperator), Allowed(st.user.Role, storage.RoleAdmin)
		p.CSRF = st.csrf
		p.Flash = st.flashes
		p.MustChangePassword = st.mustChange
	}
	return p
}

func (s *Server) assetURL(name string) string {
	return "/static/" + name + "?v=" + s.assets[name]
}

func (s *Server) handleStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	hash, ok := s.assets[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(s.static, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	if r.URL.Query().Get("v") == hash {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("ETag", `"`+hash+`"`)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

// localPath returns p when it is a path on this site, else def: it must start with one
// "/" and hold no scheme or host, no backslash and no control character anywhere.
// Browsers drop tabs and newlines from a URL and read a backslash as a slash, so
// "/", a tab, "/evil.example" would take the user off-site.
func localPath(p, def string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.Contains(p, "\\") || !utf8.ValidString(p) {
		return def
	}
	for _, c := range p {
		if unicode.IsControl(c) {
			return def
		}
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return def
	}
	return p
}
