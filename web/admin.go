package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/views"
)

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) error {
	var before int64
	if b := r.URL.Query().Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return badRequest("That page address is not valid.")
		}
		before = n
	}
	const limit = 50
	entries, err := s.store.AuditLog(r.Context(), before, limit)
	if err != nil {
		return err
	}
	v := views.Audit{Page: s.page(r, "Audit log", "audit")}
	for _, e := range entries {
		row := views.AuditRow{
			Time: s.shortTime(e.At), TimeTitle: s.fullTime(e.At), Actor: e.Actor, Action: e.Action,
			Source: e.Source, Key: e.Key, KeyShort: shortKey(e.Key), Reason: e.Reason, Previous: e.PreviousState,
		}
		if e.Key != "" {
			row.EventsURL = keyEventsURL(e.Source, e.Key)
		}
		v.Rows = append(v.Rows, row)
	}
	if len(entries) == limit {
		v.NextURL = "/audit?before=" + strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	return s.render(w, r, http.StatusOK, views.AuditView(v))
}

var roles = []string{storage.RoleViewer, storage.RoleOperator, storage.RoleAdmin}

func (s *Server) usersView(r *http.Request, form views.UserForm) (views.Users, error) {
	users, err := s.store.Users(r.Context())
	if err != nil {
		return views.Users{}, err
	}
	me, _ := UserFrom(r.Context())
	v := views.Users{Page: s.page(r, "Users", "users"), Roles: roles, Form: form}
	for _, u := range users {
		v.Rows = append(v.Rows, views.UserRow{Name: u.Name, Role: u.Role, Created: s.fullTime(u.CreatedAt), You: u.Name == me.Name})
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

var validUserName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

func (s *Server) handleAddUser(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	me, _ := UserFrom(ctx)
	form := views.UserForm{Name: strings.TrimSpace(r.PostFormValue("name")), Role: r.PostFormValue("role")}
	password := r.PostFormValue("password")
	switch {
	case !validUserName.MatchString(form.Name):
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
		_, err = s.store.CreateUser(ctx, storage.User{Name: form.Name, Role: form.Role, PasswordHash: string(hash)}, me.Name)
		switch {
		case errors.Is(err, storage.ErrExists):
			form.Error = fmt.Sprintf("There is already a user called %q.", form.Name)
		case err != nil:
			return err
		default:
			s.log.Info("user added", "by", me.Name, "user", form.Name, "role", form.Role)
			return backToUsers(w, r, "ok", fmt.Sprintf("Added %s as %s.", form.Name, form.Role))
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
	previous, err := s.store.SetUserRole(r.Context(), name, role, me.Name)
	if err == nil && previous != role {
		s.log.Info("user role changed", "by", me.Name, "user", name, "from", previous, "to", role)
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
	n, err := s.store.EndUserSessions(r.Context(), name, me.Name)
	if err == nil {
		s.log.Info("sessions ended", "by", me.Name, "user", name, "sessions", n)
		if name == me.Name {
			return s.signedOutEverywhere(w, r)
		}
	}
	return s.userChangeDone(w, r, name, err, fmt.Sprintf("Ended %d session%s of %s.", n, plural(int(n)), name))
}

func (s *Server) handleUserPassword(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	name, password := r.PostFormValue("name"), r.PostFormValue("password")
	if p := passwordProblem(password); p != "" {
		return backToUsers(w, r, "error", p)
	}
	err := s.setPassword(w, r, name, password)
	ok := fmt.Sprintf("New password set for %s; their sessions have ended.", name)
	if name == me.Name {
		ok = "Your password is changed; your other sessions have ended."
	}
	return s.userChangeDone(w, r, name, err, ok)
}

func (s *Server) handleRemoveUser(w http.ResponseWriter, r *http.Request) error {
	me, _ := UserFrom(r.Context())
	name := r.PostFormValue("name")
	if name == me.Name {
		return backToUsers(w, r, "error", "You can't remove yourself: ask another admin.")
	}
	err := s.store.DeleteUser(r.Context(), name, me.Name)
	if err == nil {
		s.log.Info("user removed", "by", me.Name, "user", name)
	}
	return s.userChangeDone(w, r, name, err, fmt.Sprintf("Removed %s; their sessions and API tokens no longer work.", name))
}

func (s *Server) sourcesView(r *http.Request) views.Sources {
	v := views.Sources{Page: s.page(r, "Sources", "sources")}
	for _, src := range s.sources {
		row := views.SourceRow{
			Name: src.Name, Path: "/webhooks/" + src.Name, Scheme: src.Scheme,
			Timestamped: src.Timestamped, Integrity: src.Integrity,
			EventID: src.EventID, KeyFields: src.KeyFields, TTL: humanDuration(src.TTL),
			ForwardURL: src.ForwardURL, MaxAttempts: src.MaxAttempts, AmountField: src.AmountField,
			EventsURL: "/events?" + url.Values{"source": {src.Name}}.Encode(),
		}
		for _, l := range []views.Header{{Name: "property", Value: src.PropertyField}, {Name: "booking", Value: src.BookingField},
			{Name: "status", Value: src.StatusField}, {Name: "amount", Value: src.AmountField}} {
			if l.Value != "" {
				row.Labels = append(row.Labels, l)
			}
		}
		for _, sec := range src.Secrets {
			row.Secrets = append(row.Secrets, views.SecretRow{
				Masked: sec.Masked, Origin: sec.Origin, Revealable: sec.Revealable && s.reveal != nil,
				RevealURL: "/sources/" + url.PathEscape(src.Name) + "/reveal",
			})
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

func (s *Server) handleSources(w http.ResponseWriter, r *http.Request) error {
	return s.render(w, r, http.StatusOK, views.SourcesView(s.sourcesView(r)))
}

// handleReveal shows an admin the generated secret of a source, once, in the answer to
// this POST (never in a page that a GET returns), and writes the reveal to the audit log.
func (s *Server) handleReveal(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	me, _ := UserFrom(ctx)
	name := r.PathValue("name")
	src, ok := s.source(name)
	if !ok || s.reveal == nil {
		return errNotFound
	}
	i := -1
	for j, sec := range src.Secrets {
		if sec.Revealable {
			i = j
		}
	}
	if i < 0 {
		return badRequest("This source's secrets come from the configuration; they are not shown here.")
	}
	secret, err := s.reveal(ctx, name)
	if err != nil {
		return err
	}
	if err := s.store.AppendAudit(ctx, storage.AuditEntry{Actor: me.Name, Action: "reveal secret", Source: name,
		Reason: "shown in the console"}); err != nil {
		return err
	}
	s.log.Info("secret revealed", "by", me.Name, "source", name)
	v := s.sourcesView(r)
	for k := range v.Rows {
		if v.Rows[k].Name == name {
			v.Rows[k].Secrets[i].Revealed = secret
		}
	}
	v.Page.Flash = append(v.Page.Flash, views.Flash{Kind: "info",
		Text: "The secret of " + name + " is shown below, this once. Configure your provider with it; the reveal is in the audit log."})
	return s.render(w, r, http.StatusOK, views.SourcesView(v))
}
