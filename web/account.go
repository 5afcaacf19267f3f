package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// tokenStore is what the account page and the API's authentication ask of storage
// about API tokens.
type tokenStore interface {
	// TokenUser returns ErrNotFound for an unknown or revoked API token.
	TokenUser(ctx context.Context, token string) (storage.User, error)
	Tokens(ctx context.Context, owner string) ([]storage.Token, error)
	CreateToken(ctx context.Context, userName, name, actor string) (string, storage.Token, error)
	// RevokeToken returns ErrNotFound unless id is a valid token of owner.
	RevokeToken(ctx context.Context, id int64, owner, actor string) error
}

func (s *Server) handleAccount(w http.ResponseWriter, r *http.Request) error {
	return s.renderAccount(w, r, http.StatusOK, views.Account{})
}

// renderAccount shows the account page with v's messages, and the user's tokens.
func (s *Server) renderAccount(w http.ResponseWriter, r *http.Request, code int, v views.Account) error {
	me, _ := UserFrom(r.Context())
	tokens, err := s.tokens.Tokens(r.Context(), me.Name)
	if err != nil {
		return err
	}
	v.Page = s.page(r, "Your account", "account")
	for _, t := range tokens {
		row := views.TokenRow{ID: t.ID, Name: t.Name, Created: s.fullTime(t.CreatedAt)}
		if !t.RevokedAt.IsZero() {
			row.Revoked = s.fullTime(t.RevokedAt)
		}
		v.Tokens = append(v.Tokens, row)
	}
	return s.render(w, r, code, views.AccountView(v))
}

// handleNewToken makes an API token for the signed-in user and shows it in this answer
// only: not in a flash, which would put it in the session cookie.
func (s *Server) handleNewToken(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	name := strings.TrimSpace(r.PostFormValue("name"))
	why := storage.TokenNameProblem(name)
	if name == "" {
		why = fmt.Sprintf("Say what the token is for, in %d characters at most.", storage.MaxTokenName)
	}
	if why != "" {
		return s.renderAccount(w, r, http.StatusUnprocessableEntity, views.Account{TokenName: name, TokenError: why})
	}
	tok, meta, err := s.tokens.CreateToken(r.Context(), me.Name, name, me.Name)
	if err != nil {
		return err
	}
	s.log.Info("token created", logUser, me.Name, logToken, meta.ID, logName, name)
	return s.renderAccount(w, r, http.StatusOK, views.Account{NewToken: tok})
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	id, err := strconv.ParseInt(r.PostFormValue("id"), 10, 64)
	if err != nil {
		return badRequest("That token id is not valid.")
	}
	// Only one's own: another user's token id is as good as an unknown one.
	switch err := s.tokens.RevokeToken(r.Context(), id, me.Name, me.Name); {
	case errors.Is(err, storage.ErrNotFound):
		flash(r, w, "error", "You have no valid token with that id.")
	case err != nil:
		return err
	default:
		s.log.Info("token revoked", logUser, me.Name, logToken, id)
		flash(r, w, "ok", "Token revoked; scripts that use it are refused from now on.")
	}
	http.Redirect(w, r, "/account", http.StatusSeeOther)
	return nil
}

// handlePasswordPage shows the password form alone: where the console sends a user whose
// password someone else chose, before anything else, and where they come back to from
// ?next= once it is changed.
func (s *Server) handlePasswordPage(w http.ResponseWriter, r *http.Request) error {
	return s.renderPasswordPage(w, r, http.StatusOK, localPath(r.URL.Query().Get("next"), "/"), "")
}

func (s *Server) renderPasswordPage(w http.ResponseWriter, r *http.Request, code int, next, why string) error {
	v := views.PasswordPage{Page: s.page(r, "Choose your password", "account"), Next: next, Error: why}
	return s.render(w, r, code, views.PasswordView(v))
}

// handleAccountPassword changes the signed-in user's own password. The current one is
// asked, so that a session left open is not enough to take the account over, and a
// wrong one counts as a failed sign-in of the user on this session at this address. The form comes
// from the account page or from the password page (which sends next); a refusal is
// shown on the page it came from. Its body is bounded in Register (passwordForm),
// before the CSRF check reads the form.
func (s *Server) handleAccountPassword(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	me, _ := UserFrom(ctx)
	current, password, again := r.PostFormValue("current"), r.PostFormValue("password"), r.PostFormValue("again")
	st, _ := ctx.Value(ctxState{}).(*requestState)
	required := st != nil && st.mustChange
	passwordPage := required || r.PostForm.Has("next")
	next := localPath(r.PostFormValue("next"), "/")
	refuse := func(code int, why string) error {
		if passwordPage {
			return s.renderPasswordPage(w, r, code, next, why)
		}
		return s.renderAccount(w, r, code, views.Account{Error: why})
	}
	// A signed-in user's check counts against the session at the client's address, not
	// the address alone, which a guesser there (an SSH tunnel's) may keep waiting; nor
	// the session alone, which a thief of its cookie elsewhere could keep waiting to stop
	// its user changing the password.
	var own string
	if st != nil && st.session != nil {
		if sid, _ := st.session.Values["sid"].(string); sid != "" {
			own = sessionScope(r, sid)
		}
	}
	th := throttleFor(r, me.Name, own)
	wait, err := s.throttled(w, r, s.now(), th)
	if err != nil {
		return err
	}
	if wait != "" {
		return refuse(http.StatusTooManyRequests, "Too many wrong passwords. Try again in "+wait+".")
	}
	u, err := s.users.UserByName(ctx, me.Name)
	if err != nil {
		return err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(current)) != nil {
		s.log.Info("password change refused: wrong current password", logUser, me.Name)
		return refuse(http.StatusUnprocessableEntity, "Your current password is not right.")
	}
	if err := s.throttles.LoginSucceeded(ctx, th.pair, th.keep()...); err != nil {
		return err
	}
	if p := passwordProblem(password); p != "" {
		return refuse(http.StatusUnprocessableEntity, p)
	}
	if password != again {
		return refuse(http.StatusUnprocessableEntity, "The two new passwords differ.")
	}
	if password == current {
		// Kept, a one-time password would go on working.
		return refuse(http.StatusUnprocessableEntity, "The new password is the current one: choose another.")
	}
	if err := s.setPassword(w, r, me.Name, password); err != nil {
		return err
	}
	switch {
	case required:
		flash(r, w, "ok", "Your own password is set: the one you were given no longer works.")
	default:
		flash(r, w, "ok", "Your password is changed; your other sessions have ended.")
	}
	target := "/account"
	if passwordPage {
		target = next
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
	return nil
}

// handleEndMySessions signs the user out everywhere: every session of theirs ends,
// this one too, and the audit log says so.
func (s *Server) handleEndMySessions(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	n, err := s.users.EndUserSessions(r.Context(), me.Name, me.Name)
	if err != nil {
		return err
	}
	s.log.Info("sessions ended", logBy, me.Name, logUser, me.Name, logSessions, n)
	return s.signedOutEverywhere(w, r)
}
