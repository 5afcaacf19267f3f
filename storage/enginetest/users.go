package enginetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestChangeUsers(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	for _, u := range []storage.User{{Name: "ada", Role: storage.RoleAdmin}, {Name: "bo", Role: storage.RoleOperator}} {
		u.PasswordHash = "hash-of-" + u.Name
		if _, err := db.CreateUser(ctx, u, "test"); err != nil {
			t.Fatal(err)
		}
	}
	role := func(name string) string {
		t.Helper()
		u, err := db.UserByName(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return u.Role
	}

	// The only admin keeps the rights to manage users, whoever asks.
	if _, err := db.SetUserRole(ctx, "ada", storage.RoleViewer, "cli:root"); !errors.Is(err, storage.ErrLastAdmin) {
		t.Fatalf("demote the only admin: %v", err)
	}
	if err := db.DeleteUser(ctx, "ada", "cli:root"); !errors.Is(err, storage.ErrLastAdmin) {
		t.Fatalf("remove the only admin: %v", err)
	}
	if role("ada") != storage.RoleAdmin {
		t.Fatal("the only admin lost the role")
	}
	for _, err := range []error{
		func() error { _, err := db.SetUserRole(ctx, "nobody", storage.RoleViewer, "ada"); return err }(),
		db.SetUserPassword(ctx, "nobody", "h", "ada"),
		db.DeleteUser(ctx, "nobody", "ada"),
	} {
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("change an unknown user: %v", err)
		}
	}
	if _, err := db.SetUserRole(ctx, "bo", "root", "ada"); err == nil {
		t.Error("an unknown role was accepted")
	}

	prev, err := db.SetUserRole(ctx, "bo", storage.RoleAdmin, "ada")
	if err != nil || prev != storage.RoleOperator || role("bo") != storage.RoleAdmin {
		t.Fatalf("promote bo: previous %q, %v, now %s", prev, err, role("bo"))
	}
	if prev, err := db.SetUserRole(ctx, "bo", storage.RoleAdmin, "ada"); err != nil || prev != storage.RoleAdmin {
		t.Fatalf("same role again: %q, %v", prev, err)
	}
	// Now that there are two admins, either may go.
	if prev, err := db.SetUserRole(ctx, "ada", storage.RoleViewer, "bo"); err != nil || prev != storage.RoleAdmin {
		t.Fatalf("demote one of two admins: %q, %v", prev, err)
	}
	if err := db.SetUserPassword(ctx, "ada", "new-hash", "bo"); err != nil {
		t.Fatal(err)
	}
	if u, _ := db.UserByName(ctx, "ada"); u.PasswordHash != "new-hash" {
		t.Fatalf("password hash after the change: %q", u.PasswordHash)
	}

	// Removing a user takes their API tokens with them.
	tok, _, err := db.CreateToken(ctx, "ada", "scripts", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.TokenUser(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteUser(ctx, "ada", "bo"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UserByName(ctx, "ada"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("removed user still there: %v", err)
	}
	if _, err := db.TokenUser(ctx, tok); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a removed user's token still works: %v", err)
	}
	tokens, err := db.Tokens(ctx, "")
	if err != nil || len(tokens) != 0 {
		t.Fatalf("tokens left: %v, %v", tokens, err)
	}
	if err := db.DeleteUser(ctx, "bo", "bo"); !errors.Is(err, storage.ErrLastAdmin) {
		t.Fatalf("remove the admin left: %v", err)
	}

	// Every change is in the audit log, by whom, with what it replaced; the no-op and the
	// refusals are not.
	log, err := db.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log {
		got = append(got, e.Actor+" "+e.Action+" "+e.Reason+" (was "+e.PreviousState+")")
	}
	want := []string{
		"bo remove user ada (was viewer)",
		"test create token \"scripts\" (id 1) for ada (was )",
		"bo set password ada (was )",
		"bo change role ada to viewer (was admin)",
		"ada change role bo to admin (was operator)",
		"test add user bo as operator (was )",
		"test add user ada as admin (was )",
	}
	if len(got) != len(want) {
		t.Fatalf("audit log:\n%q\nwant\n%q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("audit row %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// TestDB_OneTimePassword: a password someone else chose stays marked until its user sets
// their own, and the mark travels with the user into their sessions, which is where the
// console reads it on every request.
func TestOneTimePassword(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	u, err := db.CreateUser(ctx, storage.User{Name: "admin", Role: storage.RoleAdmin, PasswordHash: "printed", MustChangePassword: true}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateUser(ctx, storage.User{Name: "bo", Role: storage.RoleViewer, PasswordHash: "chosen"}, "test"); err != nil {
		t.Fatal(err)
	}
	must := func(name string) bool {
		t.Helper()
		u, err := db.UserByName(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		users, err := db.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, listed := range users {
			if listed.Name == name && listed.MustChangePassword != u.MustChangePassword {
				t.Fatalf("%s: Users says %v, UserByName %v", name, listed.MustChangePassword, u.MustChangePassword)
			}
		}
		return u.MustChangePassword
	}
	if !must("admin") || must("bo") {
		t.Fatalf("after adding: admin %v, bo %v; want true, false", must("admin"), must("bo"))
	}
	sid, err := db.CreateSession(ctx, u, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s, err := db.SessionByID(ctx, sid); err != nil || !s.User.MustChangePassword {
		t.Fatalf("session of a one-time password: %+v, %v", s.User, err)
	}
	if err := db.SetUserPassword(ctx, "admin", "own", "admin"); err != nil || must("admin") {
		t.Fatalf("after setting their own: %v, still marked %v", err, must("admin"))
	}
	if err := db.SetOneTimePassword(ctx, "bo", "given", "admin"); err != nil || !must("bo") {
		t.Fatalf("after an admin set it: %v, marked %v", err, must("bo"))
	}
	if err := db.SetOneTimePassword(ctx, "nobody", "given", "admin"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("one-time password of an unknown user: %v", err)
	}
	log, err := db.AuditLog(ctx, 0, 1)
	if err != nil || len(log) != 1 || log[0].Action != "set password" || !strings.Contains(log[0].Reason, "one-time") {
		t.Fatalf("audit of a one-time password: %+v, %v", log, err)
	}
}

// TestIDsNotReused: the id of a token or a user that is gone is never given to another,
// even when it was the highest: the audit log names tokens by id ("(id 5)"), and
// `hookdedup token revoke 5` typed from an old note must not revoke someone else's.
func TestIDsNotReused(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	createUser(t, db, "ada", storage.RoleAdmin, "pw-ada-123456")
	bo := createUser(t, db, "bo", storage.RoleOperator, "pw-bo-1234567")
	if _, _, err := db.CreateToken(ctx, "ada", "ci", "ada"); err != nil {
		t.Fatal(err)
	}
	_, gone, err := db.CreateToken(ctx, "bo", "scripts", "bo")
	if err != nil {
		t.Fatal(err)
	}
	// Removing bo, the newest user, takes the newest token with him.
	if err := db.DeleteUser(ctx, "bo", "ada"); err != nil {
		t.Fatal(err)
	}
	_, fresh, err := db.CreateToken(ctx, "ada", "report", "ada")
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID <= gone.ID {
		t.Errorf("the new token took the id %d; the removed one's was %d", fresh.ID, gone.ID)
	}
	cy := createUser(t, db, "cy", storage.RoleViewer, "pw-cy-1234567")
	if cy.ID <= bo.ID {
		t.Errorf("the new user took the id %d; the removed one's was %d", cy.ID, bo.ID)
	}
	if err := db.RevokeToken(ctx, gone.ID, "", "ada"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("revoke of the removed token's id %d: %v; want ErrNotFound", gone.ID, err)
	}
}

// TestUserNameCase: a name that an existing user has in another letter case is refused,
// with the existing user named: op1 and OP1 would read as one person in the audit log
// and to the four-eyes approval of a bulk action.
func TestUserNameCase(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	createUser(t, db, "op1", storage.RoleOperator, "pw-op1-1234567")
	for _, name := range []string{"op1", "OP1", "Op1"} {
		_, err := db.CreateUser(ctx, storage.User{Name: name, Role: storage.RoleViewer, PasswordHash: "x"}, "test")
		var taken *storage.UserNameTakenError
		if !errors.Is(err, storage.ErrExists) || !errors.As(err, &taken) || taken.Existing != "op1" || taken.Name != name {
			t.Errorf("create %q beside op1: %v; want the name taken by op1", name, err)
		}
	}
	if _, err := db.UserByName(ctx, "OP1"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("user OP1 after the refusals: %v; want ErrNotFound", err)
	}
	// Names that differ otherwise are names of their own. Both engines fold A to Z
	// alone (the name rule allows no other letter), so they agree on any name.
	for _, name := range []string{"op10", "émile", "Émile"} {
		createUser(t, db, name, storage.RoleViewer, "pw-"+name+"-123456")
	}
	users, err := db.Users(ctx)
	if err != nil || len(users) != 4 {
		t.Fatalf("users: %+v, %v; want op1, op10, émile and Émile", users, err)
	}
	log, err := db.AuditLog(ctx, 0, 100)
	if err != nil || len(log) != 4 {
		t.Errorf("audit log: %+v, %v; want the four users added alone", log, err)
	}
}
