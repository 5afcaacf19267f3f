package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/sessions"
	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// sessionStore is what sign-in, sign-out and every signed-in request ask of storage:
// the server-side sessions, and the setting that keeps the cookie keys.
type sessionStore interface {
	SettingOrInit(ctx context.Context, name string, init func() (string, error)) (string, error)
	// CreateSession returns ErrNotFound if the user was removed or given another
	// password; SessionByID returns ErrNotFound for an unknown or ended session.
	CreateSession(ctx context.Context, u storage.User, now time.Time) (string, error)
	SessionByID(ctx context.Context, id string) (storage.Session, error)
	TouchSession(ctx context.Context, id string, at time.Time) error
	EndSession(ctx context.Context, id string) error
	EndIdleSessions(ctx context.Context, seenBefore time.Time) (int64, error)
}

// touchWait bounds the wait for a session's touch (a write) on a console request.
const touchWait = 250 * time.Millisecond

// The session cookie and the setting that keeps its keys. Deleting the setting (and
// restarting) rotates the keys, which signs everyone out.
const (
	sessionCookie     = "hookdedup_session"
	sessionKeySetting = "console.session_keys"
)

// cookieName is what the cookie name is called for r: over HTTPS (see Scheme) with prefix,
// "__Host-" or "__Secure-", which a browser takes only from a secure origin (__Host- only
// for Path=/ and no Domain). Another host under the same domain, or anyone on the
// network while a page is fetched in plain HTTP, can then set no cookie the console
// reads, neither a session of their own (signed in to the same console) nor a broken
// one that signs the user out. The signature covers the name: a cookie set in plain HTTP
// is not read over HTTPS.
func cookieName(r *http.Request, prefix, name string) string {
	if Scheme(r) == "https" {
		return prefix + name
	}
	return name
}

// User is who a request acts as.
type User struct {
	Name string
	Role string // storage.RoleViewer, RoleOperator or RoleAdmin
}

type ctxState struct{}

// requestState is what the auth middleware learnt about a request.
type requestState struct {
	user    User
	csrf    string
	flashes []views.Flash
	session *sessions.Session // the cookie
	// mustChange: someone else chose the user's password; the console asks for their
	// own before anything else.
	mustChange bool
}

// UserFrom returns the user a request acts as, set by requireRole (or by WithUser for
// other kinds of authentication, such as the API's bearer tokens).
//
// For the JSON API: wrap each handler in s.requireRole(role, h) to require a session
// of at least that role (it answers 401/403 itself, and checks the CSRF token on
// unsafe methods), then read the user with UserFrom(r.Context()). An API that
// authenticates by bearer token instead puts its user in the context with WithUser and
// checks Allowed(user.Role, role) itself.
func UserFrom(ctx context.Context) (User, bool) {
	if st, ok := ctx.Value(ctxState{}).(*requestState); ok && st.user.Name != "" {
		return st.user, true
	}
	return User{}, false
}

// WithUser returns ctx acting as u (for authentication other than the session).
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, ctxState{}, &requestState{user: u})
}

// Allowed reports whether role may do what needs at least role need: viewer <
// operator < admin.
func Allowed(role, need string) bool { return storage.RoleAtLeast(role, need) }

// cookieStore reads the cookie keys from the settings, creating them on first start:
// a 64-byte authentication key and a 32-byte encryption key.
func (s *Server) cookieStore(ctx context.Context) (*sessions.CookieStore, *sessions.CookieStore, error) {
	v, err := s.sessions.SettingOrInit(ctx, sessionKeySetting, func() (string, error) {
		b := make([]byte, 96)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		return base64.StdEncoding.EncodeToString(b), nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("console: session keys: %w", err)
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != 96 {
		return nil, nil, fmt.Errorf("console: setting %s is not 96 bytes of base64: delete it to make new keys", sessionKeySetting)
	}
	cs := sessions.NewCookieStore(b[:64], b[64:])
	cs.Options = &sessions.Options{
		Path:     "/",
		MaxAge:   int(s.absolute.Seconds()),
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	}
	cs.MaxAge(cs.Options.MaxAge) // also bounds the signed timestamp inside the cookie
	// The device cookie is signed and encrypted with the same keys: its name, which
	// the signature covers, keeps a session cookie from passing for one. It goes to the
	// sign-in form's target alone.
	devices := sessions.NewCookieStore(b[:64], b[64:])
	devices.Options = &sessions.Options{
		Path:     "/login",
		MaxAge:   int(deviceMaxAge.Seconds()),
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	}
	devices.MaxAge(devices.Options.MaxAge)
	return cs, devices, nil
}

// session returns the request's session cookie (a new one when the cookie is missing
// or invalid), marked Secure and named with __Host- when the client came over TLS (see
// Scheme, cookieName). The cookie holds the id of a server-side session
// (storage.Session), the CSRF token and flashes.
func (s *Server) session(r *http.Request) *sessions.Session {
	name := cookieName(r, "__Host-", sessionCookie)
	sess, err := s.cookies.Get(r, name)
	if err != nil {
		// Invalid or old cookie (rotated keys): start afresh.
		sess, _ = s.cookies.New(r, name)
	}
	opts := *s.cookies.Options
	opts.Secure = Scheme(r) == "https"
	sess.Options = &opts
	return sess
}

// endCookie empties the session cookie and tells the browser to drop it.
func endCookie(w http.ResponseWriter, r *http.Request, sess *sessions.Session) error {
	sess.Values = map[any]any{}
	sess.Options.MaxAge = -1
	return sess.Save(r, w)
}

// sessionUser returns the signed-in user of the session cookie sess and the
// server-side session it names, or why there is none. A session past its idle or whole
// limit is ended here. The user's role is read afresh with the session, in the same
// look-up.
// The session carries the user's MustChangePassword, read in the same look-up.
func (s *Server) sessionUser(r *http.Request, sess *sessions.Session) (User, storage.Session, string, error) {
	sid, _ := sess.Values["sid"].(string)
	if sid == "" {
		return User{}, storage.Session{}, "", nil
	}
	ss, err := s.sessions.SessionByID(r.Context(), sid)
	if errors.Is(err, storage.ErrNotFound) {
		// Signed out here or everywhere, ended by an admin, or by a new password or role.
		return User{}, storage.Session{}, "Your session has ended; please sign in again.", nil
	}
	if err != nil {
		return User{}, storage.Session{}, "", err
	}
	now := s.now()
	var why string
	switch {
	case now.Sub(ss.CreatedAt) > s.absolute:
		why = "Your session ended; please sign in again."
	case now.Sub(ss.SeenAt) > s.idle:
		why = "You were signed out after a while without activity."
	default:
		return User{Name: ss.User.Name, Role: ss.User.Role}, ss, "", nil
	}
	if err := s.sessions.EndSession(r.Context(), sid); err != nil {
		return User{}, storage.Session{}, "", err
	}
	return User{}, storage.Session{}, why, nil
}

// startSession signs u in: a new server-side session, whose id goes into the cookie
// sess with a new CSRF token (never one from before sign-in). Returns ErrNotFound if u
// was removed or its password changed since it was read.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, sess *sessions.Session, u storage.User) error {
	sid, err := s.sessions.CreateSession(r.Context(), u, s.now())
	if err != nil {
		return err
	}
	sess.Values["sid"] = sid
	sess.Values["csrf"] = randomToken()
	if err := sess.Save(r, w); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	return nil
}

// requireRole serves h to signed-in users of at least role. Without a session a GET is
// redirected to /login (and comes back after) and anything else gets 401; a lower role
// gets 403. Unsafe methods must carry the session's CSRF token (form field "csrf" or
// header X-CSRF-Token), on top of the cross-origin protection every console route has.
// A user whose password someone else chose (MustChangePassword) is sent to choose their
// own first: a GET is redirected to /account/password (and comes back after), anything
// else gets 403.
func (s *Server) requireRole(role string, h handlerFunc) http.Handler {
	return s.signedIn(role, false, h)
}

// choosingPassword serves h to every signed-in user, also one who must choose their
// own password first: the page where they do so.
func (s *Server) choosingPassword(h handlerFunc) http.Handler {
	return s.signedIn(storage.RoleViewer, true, h)
}

// signedIn is requireRole; choosing lets a user who must choose their own password in.
func (s *Server) signedIn(role string, choosing bool, h handlerFunc) http.Handler {
	return s.protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		sess := s.session(r)
		u, ss, why, err := s.sessionUser(r, sess)
		if err != nil {
			s.consoleError(w, r, err)
			return
		}
		if u.Name == "" {
			if why != "" {
				sess.Values = map[any]any{}
				sess.AddFlash(why)
				_ = sess.Save(r, w)
			}
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				redirectBack(w, r, "/login")
				return
			}
			s.renderError(w, r, http.StatusUnauthorized, "Signed out", "Sign in again to do this.")
			return
		}
		st := &requestState{user: u, session: sess, mustChange: ss.User.MustChangePassword}
		st.csrf, _ = sess.Values["csrf"].(string)
		for _, f := range sess.Flashes() {
			if text, ok := f.(string); ok {
				kind, msg, ok := strings.Cut(text, "|")
				if !ok {
					kind, msg = "info", text
				}
				st.flashes = append(st.flashes, views.Flash{Kind: kind, Text: msg})
			}
		}
		ctx := context.WithValue(r.Context(), ctxState{}, st)
		r = r.WithContext(ctx)
		if st.mustChange && !choosing {
			// Before anything else, also before a role is checked: the password is known
			// to someone else (printed at first start, or set by an admin).
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				redirectBack(w, r, "/account/password")
				return
			}
			s.renderError(w, r, http.StatusForbidden, "Choose your password first",
				"Your password was chosen by someone else: choose your own on the password page before anything else.")
			return
		}
		if !Allowed(u.Role, role) {
			s.consoleError(w, r, errForbidden)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.csrfChecked(w, r, st.csrf) {
			return
		}
		// Keep the session alive (idle timeout): a write, so once a minute at most.
		if now := s.now(); now.Sub(ss.SeenAt) > time.Minute {
			sid, _ := sess.Values["sid"].(string)
			// Briefly: a touch that cannot be written now is tried again at the next
			// request, and the request's own write must still be answered within the
			// busy timeout when another process holds the lock.
			ctx, cancel := context.WithTimeout(r.Context(), touchWait)
			if err := s.sessions.TouchSession(ctx, sid, now); err != nil {
				s.log.Warn("touching session", logErr, err)
			}
			cancel()
		}
		// Consume shown flashes.
		if len(st.flashes) > 0 {
			if err := sess.Save(r, w); err != nil {
				s.log.Warn("saving session", logErr, err)
			}
		}
		s.serve(singleValued(h)).ServeHTTP(w, r)
	}))
}

// redirectBack sends a GET to page, which comes back to what was asked for (by ?next=)
// once it is done.
func redirectBack(w http.ResponseWriter, r *http.Request, page string) {
	if r.URL.RequestURI() != "/" {
		page += "?next=" + url.QueryEscape(r.URL.RequestURI())
	}
	http.Redirect(w, r, page, http.StatusSeeOther)
}

// public serves pages that need no session (sign-in, sign-out).
func (s *Server) public(h handlerFunc) http.Handler {
	return s.protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s.serve(h).ServeHTTP(w, r)
	}))
}

// flash queues a message for the next page the user sees (kind: ok, error, info).
func flash(r *http.Request, w http.ResponseWriter, kind, text string) {
	st, ok := r.Context().Value(ctxState{}).(*requestState)
	if !ok || st.session == nil {
		return
	}
	st.session.AddFlash(kind + "|" + text)
	_ = st.session.Save(r, w)
}

func (s *Server) handleLoginForm(w http.ResponseWriter, r *http.Request) error {
	sess := s.session(r)
	if u, _, _, err := s.sessionUser(r, sess); err == nil && u.Name != "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	v := views.Login{Page: s.page(r, "Sign in", ""), Next: localPath(r.URL.Query().Get("next"), "/")}
	for _, f := range sess.Flashes() {
		if text, ok := f.(string); ok {
			v.Page.Flash = append(v.Page.Flash, views.Flash{Kind: "info", Text: text})
		}
	}
	switch {
	case r.URL.Query().Get("out") == "everywhere":
		v.Page.Flash = append(v.Page.Flash, views.Flash{Kind: "ok", Text: "You are signed out everywhere: all your sessions have ended."})
	case r.URL.Query().Has("out"):
		v.Page.Flash = append(v.Page.Flash, views.Flash{Kind: "ok", Text: "You are signed out."})
	}
	if len(v.Page.Flash) > 0 {
		_ = sess.Save(r, w)
	}
	return s.render(w, r, http.StatusOK, views.LoginView(v))
}

// handleLogin signs a user in; its body is bounded in Register (passwordForm).
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) error {
	if !s.formRead(w, r) {
		return nil
	}
	name := strings.TrimSpace(r.PostFormValue("username"))
	password := r.PostFormValue("password")
	next := localPath(r.PostFormValue("next"), "/")
	fail := func(code int, msg string) error {
		v := views.Login{Page: s.page(r, "Sign in", ""), Username: name, Next: next, Error: msg}
		return s.render(w, r, code, views.LoginView(v))
	}
	// Neither can belong to an account past these bounds; they are said, so that whoever
	// pasted a long one looks at what was pasted rather than typing it again.
	switch {
	case name == "" || password == "":
		return fail(http.StatusBadRequest, "Enter your username and password.")
	case len(name) > 128:
		return fail(http.StatusBadRequest, "That username is longer than any can be: a username is 64 characters at most.")
	case len(password) > 512:
		return fail(http.StatusBadRequest, "That password is longer than any can be: a password is 72 bytes at most. Check what was pasted.")
	}
	addr := clientAddr(r)
	dev, err := s.deviceOf(r, name)
	if err != nil {
		return err
	}
	var own string
	if dev != "" {
		own = "device:" + dev
	}
	th := throttleFor(r, name, own)
	now := s.now()
	wait, err := s.throttled(w, r, now, th)
	if err != nil {
		return err
	}
	u, err := s.users.UserByName(r.Context(), name)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	// The log names the account tried only when there is one: a name no user has is
	// often a password typed into the wrong field, and the log is read by more people
	// than the users' passwords are meant for.
	logged := name
	if err != nil {
		logged = "(no such user)"
	}
	if wait != "" {
		s.log.Warn("sign-in throttled", logUser, logged, logRemote, addr)
		return fail(http.StatusTooManyRequests, "Too many failed sign-ins. Try again in "+wait+".")
	}
	hash := s.dummyHash
	if err == nil {
		hash = []byte(u.PasswordHash)
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || err != nil {
		s.log.Info("sign-in failed", logUser, logged, logRemote, addr)
		return fail(http.StatusUnauthorized, "Wrong username or password.")
	}
	if err := s.throttles.LoginSucceeded(r.Context(), th.pair, th.keep()...); err != nil {
		return err
	}
	sess := s.session(r)
	if old, _ := sess.Values["sid"].(string); old != "" {
		// Signing in again (maybe as someone else) ends the session this browser had.
		if err := s.sessions.EndSession(r.Context(), old); err != nil {
			return err
		}
	}
	sess.Values = map[any]any{}
	err = s.startSession(w, r, sess, u)
	if errors.Is(err, storage.ErrNotFound) {
		// Removed, or given a new password, since the check above.
		return fail(http.StatusUnauthorized, "Wrong username or password.")
	}
	if err != nil {
		return err
	}
	if err := s.setDevice(w, r, u.Name, dev); err != nil {
		// Signed in all the same: without the device the next sign-in waits with the address.
		s.log.Warn("remembering the device", logErr, err)
	}
	// Sessions whose browsers never came back: sign-ins are rare enough to sweep them.
	if _, err := s.sessions.EndIdleSessions(r.Context(), now.Add(-s.idle)); err != nil {
		s.log.Warn("ending idle sessions", logErr, err)
	}
	s.log.Info("signed in", logUser, u.Name, logRole, u.Role, logRemote, addr)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// csrfChecked says whether r carries the session's CSRF token want (form field "csrf"
// or header X-CSRF-Token), and answers 403 when it does not, or 413 when its form is
// over the bound (formRead), whichever field the token came in.
func (s *Server) csrfChecked(w http.ResponseWriter, r *http.Request, want string) bool {
	if !s.formRead(w, r) {
		return false
	}
	token := r.Header.Get("X-CSRF-Token")
	if token == "" {
		token = r.PostFormValue("csrf")
	}
	if want == "" || subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		s.renderError(w, r, http.StatusForbidden, "Request refused",
			"This form has expired or did not come from the console. Reload the page and try again.")
		return false
	}
	return true
}

// handleLogout ends this browser's session, on the server: a copy of the cookie is of
// no use afterwards. The sign-out form carries the session's CSRF token, as every form
// of a signed-in user does: another site cannot sign the user out.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) error {
	sess := s.session(r)
	if sid, _ := sess.Values["sid"].(string); sid != "" {
		want, _ := sess.Values["csrf"].(string)
		if !s.csrfChecked(w, r, want) {
			return nil
		}
		if err := s.sessions.EndSession(r.Context(), sid); err != nil {
			return err
		}
	}
	if err := endCookie(w, r, sess); err != nil {
		return err
	}
	http.Redirect(w, r, "/login?out=1", http.StatusSeeOther)
	return nil
}

// signedOutEverywhere drops the cookie of a session just ended with all the others and
// says so on the sign-in page.
func (s *Server) signedOutEverywhere(w http.ResponseWriter, r *http.Request) error {
	st, ok := r.Context().Value(ctxState{}).(*requestState)
	if ok && st.session != nil {
		if err := endCookie(w, r, st.session); err != nil {
			return err
		}
	}
	http.Redirect(w, r, "/login?out=everywhere", http.StatusSeeOther)
	return nil
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
