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
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/gorilla/sessions"
	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// Store is what the console needs of storage; *storage.DB satisfies it.
type Store interface {
	// Delivery returns ErrNotFound if there is no delivery with that id.
	Delivery(ctx context.Context, id int64) (storage.Delivery, error)
	// FirstKeyDeliveries returns the first limit deliveries of a key, oldest first, and
	// whether it has more.
	FirstKeyDeliveries(ctx context.Context, source, key string, limit int) ([]storage.Delivery, bool, error)
	// Claim returns ErrNotFound if the key was never claimed or its row was swept.
	Claim(ctx context.Context, source, key string) (storage.Claim, error)
	Attempts(ctx context.Context, source, key string) ([]storage.Attempt, error)
	// LastAttempt returns ErrNotFound if no attempt was made.
	LastAttempt(ctx context.Context, source, key string) (storage.Attempt, error)
	Keys(ctx context.Context, f storage.KeyFilter) (storage.KeyPage, error)
	StuckCounts(ctx context.Context, stuckBefore time.Time) (map[string]int, error)
	// ReleaseKey returns ErrNotFound for an unknown key and ErrBusy for a key in flight.
	ReleaseKey(ctx context.Context, r storage.Release) (storage.Released, error)
	AuditLog(ctx context.Context, before int64, limit int) ([]storage.AuditEntry, error)
	AppendAudit(ctx context.Context, e storage.AuditEntry) error
	Events(ctx context.Context, f storage.EventFilter) (storage.EventPage, error)
	EachEvent(ctx context.Context, f storage.EventFilter, fn func(storage.Delivery) error) error
	// RejectionsNotStored counts the rejections f matches that have no delivery row.
	RejectionsNotStored(ctx context.Context, f storage.EventFilter) (int64, error)
	DeliveryStats(ctx context.Context, from, to time.Time, step time.Duration) ([]storage.StatBucket, error)
	RollupStats(ctx context.Context, limit int) (int, error)
	RecentDuplicates(ctx context.Context, since time.Time, limit int) ([]storage.Delivery, error)
	// UserByName returns ErrNotFound if there is no such user.
	UserByName(ctx context.Context, name string) (storage.User, error)
	Users(ctx context.Context) ([]storage.User, error)
	// CreateUser writes the audit row too; it returns ErrExists if the name is taken.
	CreateUser(ctx context.Context, u storage.User, actor string) (storage.User, error)
	// SetUserRole, SetUserPassword and DeleteUser return ErrNotFound for an unknown user;
	// SetUserRole and DeleteUser return ErrLastAdmin rather than leave no admin.
	SetUserRole(ctx context.Context, name, role, actor string) (previous string, err error)
	SetUserPassword(ctx context.Context, name, hash, actor string) error
	DeleteUser(ctx context.Context, name, actor string) error
	SettingOrInit(ctx context.Context, name string, init func() (string, error)) (string, error)
	// CreateSession returns ErrNotFound if the user was removed or given another
	// password; SessionByID returns ErrNotFound for an unknown or ended session;
	// EndUserSessions writes the audit row too, and returns ErrNotFound for an unknown user.
	CreateSession(ctx context.Context, u storage.User, now time.Time) (string, error)
	SessionByID(ctx context.Context, id string) (storage.Session, error)
	TouchSession(ctx context.Context, id string, at time.Time) error
	EndSession(ctx context.Context, id string) error
	EndIdleSessions(ctx context.Context, seenBefore time.Time) (int64, error)
	EndUserSessions(ctx context.Context, name, actor string) (int64, error)
	LoginAttempt(ctx context.Context, now time.Time, scopes map[string]storage.Throttle) (until time.Time, err error)
	LoginSucceeded(ctx context.Context, clear string, keep ...string) error
	// TokenUser returns ErrNotFound for an unknown or revoked API token.
	TokenUser(ctx context.Context, token string) (storage.User, error)
	Tokens(ctx context.Context, owner string) ([]storage.Token, error)
	CreateToken(ctx context.Context, userName, name, actor string) (string, storage.Token, error)
	// RevokeToken returns ErrNotFound unless id is a valid token of owner.
	RevokeToken(ctx context.Context, id int64, owner, actor string) error
	ReleaseKeys(ctx context.Context, f storage.KeyFilter, r storage.Release) ([]storage.KeyOutcome, error)
	ReleaseEach(ctx context.Context, keys []storage.KeyRef, r storage.Release) ([]storage.KeyOutcome, error)
}

// Source is a configured webhook source as the console shows it. It carries no secret:
// only masked descriptions of them.
type Source struct {
	Name        string
	Scheme      string
	Timestamped bool // the scheme signs a timestamp (replay protection)
	Integrity   bool // the scheme covers the body
	EventID     string
	KeyFields   []string
	TTL         time.Duration
	ForwardURL  string
	MaxAttempts int
	AmountField string
	// Where the console's labels come from: JSON pointers, "" when not read.
	PropertyField, BookingField, StatusField string
	Secrets                                  []Secret
}

// Secret describes one secret of a source without its value.
type Secret struct {
	Masked string // e.g. "whsec_••••••••"
	Origin string // where it comes from, e.g. "environment variable OTA_SECRET"
	// Revealable: generated by the server and kept in its database, so an admin may
	// see it (to configure the provider) through Config.RevealSecret.
	Revealable bool
}

// Config wires a Server.
type Config struct {
	Store   Store
	Sources []Source
	// Derive returns the key a payload gets from source, for the key lab. On an error
	// the returned Derivation may still hold what was found (fields, payload hash).
	Derive func(source string, h http.Header, body []byte) (storage.Derivation, error)
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
}

// Server serves the console.
type Server struct {
	store    Store
	sources  []Source
	derive   func(string, http.Header, []byte) (storage.Derivation, error)
	reveal   func(context.Context, string) (string, error)
	wake     func()
	stuck    time.Duration
	static   fs.FS
	assets   map[string]string // file name → content hash
	log      *slog.Logger
	loc      *time.Location
	now      func() time.Time
	idle     time.Duration
	absolute time.Duration
	cookies  *sessions.CookieStore
	cop      *http.CrossOriginProtection
	cost     int
	// dummyHash is compared against when a user does not exist, so that a wrong name
	// costs the same time as a wrong password.
	dummyHash []byte
}

// New returns a Server for cfg. It reads (creating on first start) the session keys
// kept in the database's settings.
func New(ctx context.Context, cfg Config) (*Server, error) {
	s := &Server{
		store: cfg.Store, sources: cfg.Sources, derive: cfg.Derive, reveal: cfg.RevealSecret, wake: cfg.Wake,
		stuck: cfg.StuckAfter, static: cfg.Static, log: cfg.Logger, loc: cfg.Location, now: cfg.Now,
		idle: cfg.IdleTimeout, absolute: cfg.AbsoluteTimeout, assets: map[string]string{}, cost: cfg.BcryptCost,
	}
	if s.store == nil || s.static == nil {
		return nil, errors.New("console: Store and Static are required")
	}
	if s.stuck <= 0 {
		s.stuck = 10 * time.Minute
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "console")
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
	if s.cookies, err = s.sessionStore(ctx); err != nil {
		return nil, err
	}
	s.cop = http.NewCrossOriginProtection()
	s.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, r, http.StatusForbidden, "Request refused",
			"This form was sent from another site. Reload the console and try again.")
	}))
	return s, nil
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
	mux.Handle("POST /login", s.public(s.handleLogin))
	mux.Handle("POST /logout", s.public(s.handleLogout))

	mux.Handle("GET /{$}", s.requireRole(viewer, s.handleDashboard))
	mux.Handle("GET /events", s.requireRole(viewer, s.handleEvents))
	mux.Handle("GET /events.csv", s.requireRole(viewer, s.handleEventsCSV))
	mux.Handle("GET /events/{id}", s.requireRole(viewer, s.handleEvent))
	mux.Handle("GET /keys", s.requireRole(viewer, s.handleKeys))
	mux.Handle("POST /keys/release", s.requireRole(operator, s.handleRelease))
	mux.Handle("GET /lab", s.requireRole(viewer, s.handleLab))
	mux.Handle("POST /lab", s.requireRole(viewer, s.handleLab))
	mux.Handle("GET /audit", s.requireRole(viewer, s.handleAudit))
	mux.Handle("GET /account", s.requireRole(viewer, s.handleAccount))
	mux.Handle("POST /account/password", s.requireRole(viewer, s.handleAccountPassword))
	mux.Handle("POST /account/sessions/end", s.requireRole(viewer, s.handleEndMySessions))
	mux.Handle("POST /account/tokens", s.requireRole(viewer, s.handleNewToken))
	mux.Handle("POST /account/tokens/revoke", s.requireRole(viewer, s.handleRevokeToken))
	mux.Handle("GET /users", s.requireRole(admin, s.handleUsers))
	mux.Handle("POST /users", s.requireRole(admin, s.handleAddUser))
	mux.Handle("POST /users/role", s.requireRole(admin, s.handleUserRole))
	mux.Handle("POST /users/password", s.requireRole(admin, s.handleUserPassword))
	mux.Handle("POST /users/sessions/end", s.requireRole(admin, s.handleEndUserSessions))
	mux.Handle("POST /users/remove", s.requireRole(admin, s.handleRemoveUser))
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

// httpError is an error with the status and words a user should see.
type httpError struct {
	code           int
	title, message string
}

func (e *httpError) Error() string { return e.title + ": " + e.message }

var (
	errNotFound  = &httpError{http.StatusNotFound, "Not found", "There is nothing at this address."}
	errForbidden = &httpError{http.StatusForbidden, "Not allowed", "Your role does not allow this. Ask an admin."}
)

func badRequest(msg string) error {
	return &httpError{http.StatusBadRequest, "Bad request", msg}
}

// serve runs h and maps its error: storage.ErrNotFound to 404, an httpError to its
// code, anything else to 500 and one log line. Users never see internal error text.
func (s *Server) serve(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var he *httpError
		switch {
		case errors.As(err, &he):
			s.renderError(w, r, he.code, he.title, he.message)
		case errors.Is(err, storage.ErrNotFound):
			s.renderError(w, r, http.StatusNotFound, errNotFound.title, errNotFound.message)
		case errors.Is(err, context.Canceled):
			// The client went away.
		default:
			s.log.Error("console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			s.renderError(w, r, http.StatusInternalServerError, "Something went wrong",
				"The server could not complete this request. It has been logged; try again in a moment.")
		}
	})
}

// protect adds the console's security headers and refuses cross-origin unsafe requests.
func (s *Server) protect(h http.Handler) http.Handler {
	h = s.cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
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
		s.log.Error("render error page", "err", err)
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

// source returns the configured source named name.
func (s *Server) source(name string) (Source, bool) {
	i := slices.IndexFunc(s.sources, func(src Source) bool { return src.Name == name })
	if i < 0 {
		return Source{}, false
	}
	return s.sources[i], true
}

func (s *Server) sourceNames() []string {
	out := make([]string, len(s.sources))
	for i, src := range s.sources {
		out[i] = src.Name
	}
	return out
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
