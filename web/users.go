package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

// userStore is what the users page, the account page and sign-in ask of storage about
// users. Each change writes its own audit row.
type userStore interface {
	// UserByName returns ErrNotFound if there is no such user.
	UserByName(ctx context.Context, name string) (storage.User, error)
	Users(ctx context.Context) ([]storage.User, error)
	// CreateUser returns a *storage.UserNameTakenError, which is ErrExists, if a
	// user has the name, letter case aside.
	CreateUser(ctx context.Context, u storage.User, actor string) (storage.User, error)
	// SetUserRole, SetUserPassword, DeleteUser and EndUserSessions return ErrNotFound
	// for an unknown user; SetUserRole and DeleteUser return ErrLastAdmin rather than
	// leave no admin.
	SetUserRole(ctx context.Context, name, role, actor string) (previous string, err error)
	// SetUserPassword is for a password the user chose; SetOneTimePassword for one
	// someone else chose, which the user is to replace at their next sign-in.
	SetUserPassword(ctx context.Context, name, hash, actor string) error
	SetOneTimePassword(ctx context.Context, name, hash, actor string) error
	DeleteUser(ctx context.Context, name, actor string) error
	EndUserSessions(ctx context.Context, name, actor string) (int64, error)
}

var roles = []string{storage.RoleViewer, storage.RoleOperator, storage.RoleAdmin}

func (s *Server) usersView(r *http.Request, form views.UserForm) (views.Users, error) {
	users, err := s.users.Users(r.Context())
	if err != nil {
		return views.Users{}, err
	}
	tokens, err := s.tokens.Tokens(r.Context(), "")
	if err != nil {
		return views.Users{}, err
	}
	valid := map[string]int{}
	for _, t := range tokens {
		if t.RevokedAt.IsZero() {
			valid[t.UserName]++
		}
	}
	me, _ := UserFrom(r.Context())
	v := views.Users{Page: s.page(r, "Users", "users"), Roles: roles, Form: form}
	for _, u := range users {
		v.Rows = append(v.Rows, views.UserRow{Name: u.Name, Role: u.Role, Created: s.fullTime(u.CreatedAt), You: u.Name == me.Name,
			MustChangePassword: u.MustChangePassword, Tokens: valid[u.Name]})
	}
	return v, nil
}

func (s *Server) handleUsers(w http.ResponseWriter, r *http.Request) error {
	v, err := s.usersView(r, views.UserForm{Role: storage.RoleViewer})
	if err != nil {
		return err
	}
	return s.render(w, r, http.StatusOK, views.UsersView(v))
}

func (s *Server) handleAddUser(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	me, _ := UserFrom(ctx)
	form := views.UserForm{Name: strings.TrimSpace(r.PostFormValue("name")), Role: r.PostFormValue("role")}
	password := r.PostFormValue("password")
	switch {
	case storage.CheckUserName(form.Name) != nil:
		form.Error = "A name is 1 to 64 letters, digits, dots, dashes, underscores or @, starting with a letter or digit."
	case !storage.ValidRole(form.Role):
		form.Error = "Choose a role: viewer, operator or admin."
	default:
		form.Error = passwordProblem(password)
	}
	if form.Error == "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cost)
		if err != nil {
			return err
		}
		// The admin knows the password: it is one-time, the new user chooses their own.
		_, err = s.users.CreateUser(ctx, storage.User{Name: form.Name, Role: form.Role, PasswordHash: string(hash),
			MustChangePassword: true}, me.Name)
		var taken *storage.UserNameTakenError
		switch {
		case errors.As(err, &taken) && taken.Existing != form.Name:
			form.Error = fmt.Sprintf("There is already a user called %q: %q differs from it only in letter case, and would be taken for them.",
				taken.Existing, form.Name)
		case errors.Is(err, storage.ErrExists):
			form.Error = fmt.Sprintf("There is already a user called %q.", form.Name)
		case err != nil:
			return err
		default:
			s.log.Info("user added", logBy, me.Name, logUser, form.Name, logRole, form.Role)
			return backToUsers(w, r, "ok", fmt.Sprintf("Added %s as %s. They choose their own password at their first sign-in.", form.Name, form.Role))
		}
	}
	v, err := s.usersView(r, form)
	if err != nil {
		return err
	}
	return s.render(w, r, http.StatusUnprocessableEntity, views.UsersView(v))
}

// passwordProblem says what is wrong with a new console password, as a sentence, or ""
// if nothing is.
func passwordProblem(password string) string {
	if err := storage.CheckPassword(password); err != nil {
		return "The " + err.Error() + "."
	}
	return ""
}

// userChangeDone reports the outcome of a change to a user as a flash on the users page.
// Refusals the admin can act on are flashed too; anything else is an error.
func (s *Server) userChangeDone(w http.ResponseWriter, r *http.Request, name string, err error, ok string) error {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return backToUsers(w, r, "error", fmt.Sprintf("There is no user called %q any more.", name))
	case errors.Is(err, storage.ErrLastAdmin):
		return backToUsers(w, r, "error", fmt.Sprintf("%s is the only admin: make another user admin first.", name))
	case err != nil:
		return err
	}
	return backToUsers(w, r, "ok", ok)
}

// backToUsers sends the browser back to the users page with a message.
func backToUsers(w http.ResponseWriter, r *http.Request, kind, text string) error {
	flash(r, w, kind, text)
	http.Redirect(w, r, "/users", http.StatusSeeOther)
	return nil
}

func (s *Server) handleUserRole(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	name, role := r.PostFormValue("name"), r.PostFormValue("role")
	switch {
	case name == me.Name:
		// An admin who demoted themselves by mistake could not undo it.
		return backToUsers(w, r, "error", "You can't change your own role: ask another admin.")
	case !storage.ValidRole(role):
		return badRequest("Choose a role: viewer, operator or admin.")
	}
	previous, err := s.users.SetUserRole(r.Context(), name, role, me.Name)
	if err == nil && previous != role {
		s.log.Info("user role changed", logBy, me.Name, logUser, name, logFrom, previous, logTo, role)
	}
	ok := fmt.Sprintf("%s is now %s.", name, role)
	if previous != role {
		ok = fmt.Sprintf("%s is now %s. Their sessions have ended.", name, role)
	}
	return s.userChangeDone(w, r, name, err, ok)
}

// handleEndUserSessions ends every console session of a user (audited), for an admin
// who suspects a session was taken or left open somewhere. API tokens stay valid: they
// are revoked one by one.
func (s *Server) handleEndUserSessions(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	name := r.PostFormValue("name")
	n, err := s.users.EndUserSessions(r.Context(), name, me.Name)
	if err == nil {
		s.log.Info("sessions ended", logBy, me.Name, logUser, name, logSessions, n)
		if name == me.Name {
			return s.signedOutEverywhere(w, r)
		}
	}
	return s.userChangeDone(w, r, name, err, fmt.Sprintf("Ended %d session%s of %s.", n, plural(int(n)), name))
}

// handleRevokeUserTokens revokes every valid API token of a user (each audited), for an
// admin taking back an account that may have been taken: a new password and ended
// sessions leave its tokens working.
func (s *Server) handleRevokeUserTokens(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	name := r.PostFormValue("name")
	if _, err := s.users.UserByName(r.Context(), name); err != nil {
		return s.userChangeDone(w, r, name, err, "")
	}
	tokens, err := s.tokens.Tokens(r.Context(), name)
	if err != nil {
		return err
	}
	n := 0
	for _, t := range tokens {
		if !t.RevokedAt.IsZero() {
			continue
		}
		switch err := s.tokens.RevokeToken(r.Context(), t.ID, name, me.Name); {
		case errors.Is(err, storage.ErrNotFound): // revoked meanwhile
		case err != nil:
			return err
		default:
			n++
		}
	}
	s.log.Info("user's tokens revoked", logBy, me.Name, logUser, name, "tokens", n)
	return s.userChangeDone(w, r, name, nil, fmt.Sprintf("Revoked %d API token%s of %s.", n, plural(n), name))
}

func (s *Server) handleUserPassword(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	name, password := r.PostFormValue("name"), r.PostFormValue("password")
	// Their own goes through the account page, which asks for the current password:
	// a session left open must not be enough to take the account over.
	if name == me.Name {
		return backToUsers(w, r, "error", "Change your own password on your account page: it asks for your current one.")
	}
	if p := passwordProblem(password); p != "" {
		return backToUsers(w, r, "error", p)
	}
	err := s.setPassword(w, r, name, password)
	msg := fmt.Sprintf("New password set for %s, one-time: they choose their own at their next sign-in. Their sessions have ended.", name)
	if err == nil {
		if n := s.validTokens(r.Context(), name); n > 0 {
			tokens := fmt.Sprintf("Their %d API tokens still work", n)
			if n == 1 {
				tokens = "Their API token still works"
			}
			msg += " " + tokens + ": revoke under Change… if the account may have been taken."
		}
	}
	return s.userChangeDone(w, r, name, err, msg)
}

func (s *Server) handleRemoveUser(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	name := r.PostFormValue("name")
	if name == me.Name {
		return backToUsers(w, r, "error", "You can't remove yourself: ask another admin.")
	}
	err := s.users.DeleteUser(r.Context(), name, me.Name)
	if err == nil {
		s.log.Info("user removed", logBy, me.Name, logUser, name)
	}
	return s.userChangeDone(w, r, name, err, fmt.Sprintf("Removed %s; their sessions and API tokens no longer work.", name))
}

// setPassword gives the named user a new password, by the signed-in user. Set for
// someone else, it is one-time: its user chooses their own at their next sign-in. The
// new password ends every session of that user; when that is the signed-in user, this
// browser gets a new session so that it stays signed in. Returns the store's errors
// (ErrNotFound).
func (s *Server) setPassword(w http.ResponseWriter, r *http.Request, name, password string) error {
	me, _ := UserFrom(r.Context())
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cost)
	if err != nil {
		return err
	}
	set := s.users.SetUserPassword
	if name != me.Name {
		set = s.users.SetOneTimePassword
	}
	if err := set(r.Context(), name, string(hash), me.Name); err != nil {
		return err
	}
	s.log.Info("user password set", logBy, me.Name, logUser, name)
	st, ok := r.Context().Value(ctxState{}).(*requestState)
	if name != me.Name || !ok || st.session == nil {
		return nil
	}
	u, err := s.users.UserByName(r.Context(), name) // for its id
	if err != nil {
		return err
	}
	// With the hash set here: should another change come in between, it wins.
	u.PasswordHash = string(hash)
	return s.startSession(w, r, st.session, u)
}

// validTokens counts name's valid API tokens, 0 when they cannot be read (the message
// that says so is a courtesy).
func (s *Server) validTokens(ctx context.Context, name string) int {
	tokens, err := s.tokens.Tokens(ctx, name)
	if err != nil {
		return 0
	}
	n := 0
	for _, t := range tokens {
		if t.RevokedAt.IsZero() {
			n++
		}
	}
	return n
}
