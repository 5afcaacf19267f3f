package enginetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

func TestSessions(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	users := map[string]storage.User{}
	for _, u := range []storage.User{{Name: "ada", Role: storage.RoleAdmin}, {Name: "bo", Role: storage.RoleOperator}} {
		u.PasswordHash = "hash-of-" + u.Name
		u, err := db.CreateUser(ctx, u, "test")
		if err != nil {
			t.Fatal(err)
		}
		users[u.Name] = u
	}
	start := func(name string) string {
		t.Helper()
		id, err := db.CreateSession(ctx, users[name], c.Now())
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	alive := func(id string) bool {
		t.Helper()
		_, err := db.SessionByID(ctx, id)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	t.Run("CreateAndFind", func(t *testing.T) {
		id := start("bo")
		s, err := db.SessionByID(ctx, id)
		if err != nil || s.User.Name != "bo" || s.User.Role != storage.RoleOperator || s.User.PasswordHash != "" ||
			!s.CreatedAt.Equal(c.Now()) || !s.SeenAt.Equal(c.Now()) {
			t.Fatalf("session = %+v, %v", s, err)
		}
		if other := start("bo"); other == id || len(id) < 40 {
			t.Fatalf("ids %q and %q: want two distinct random ids", id, other)
		}
		c.Add(5 * time.Minute)
		if err := db.TouchSession(ctx, id, c.Now()); err != nil {
			t.Fatal(err)
		}
		if s, _ := db.SessionByID(ctx, id); !s.SeenAt.Equal(c.Now()) || s.CreatedAt.Equal(c.Now()) {
			t.Fatalf("after a touch: %+v", s)
		}
		if _, err := db.SessionByID(ctx, id+"x"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("an unknown id: %v", err)
		}
		if err := db.EndSession(ctx, id); err != nil || alive(id) {
			t.Fatalf("ended session: %v, alive %v", err, alive(id))
		}
		if err := db.EndSession(ctx, id); err != nil {
			t.Fatalf("ending it again: %v", err)
		}
	})
	t.Run("NotWithAnOldPassword", func(t *testing.T) {
		stale := users["bo"]
		stale.PasswordHash = "an older hash"
		if _, err := db.CreateSession(ctx, stale, c.Now()); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a session for a password since changed: %v", err)
		}
		if _, err := db.CreateSession(ctx, storage.User{ID: 999, Name: "ghost"}, c.Now()); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a session for no user: %v", err)
		}
	})
	t.Run("EndWithUserChanges", func(t *testing.T) {
		ada, bo := start("ada"), start("bo")
		if err := db.SetUserPassword(ctx, "bo", "new-hash", "ada"); err != nil {
			t.Fatal(err)
		}
		if alive(bo) || !alive(ada) {
			t.Fatalf("after bo's new password: bo alive %v, ada alive %v", alive(bo), alive(ada))
		}
		u := users["bo"]
		u.PasswordHash = "new-hash"
		users["bo"] = u
		bo = start("bo")
		if _, err := db.SetUserRole(ctx, "bo", storage.RoleOperator, "ada"); err != nil || !alive(bo) {
			t.Fatalf("the same role again ends the session: %v, alive %v", err, alive(bo))
		}
		if _, err := db.SetUserRole(ctx, "bo", storage.RoleViewer, "ada"); err != nil || alive(bo) {
			t.Fatalf("after a new role: %v, alive %v", err, alive(bo))
		}
		bo = start("bo")
		if err := db.DeleteUser(ctx, "bo", "ada"); err != nil || alive(bo) || !alive(ada) {
			t.Fatalf("after removal: %v, alive %v", err, alive(bo))
		}
	})
	t.Run("EndUserSessions", func(t *testing.T) {
		one, two := start("ada"), start("ada")
		n, err := db.EndUserSessions(ctx, "ada", "ada")
		if err != nil || n < 2 || alive(one) || alive(two) {
			t.Fatalf("ended %d: %v, alive %v %v", n, err, alive(one), alive(two))
		}
		log, err := db.AuditLog(ctx, 0, 1)
		if err != nil || len(log) != 1 || log[0].Action != "end sessions" || log[0].Actor != "ada" {
			t.Fatalf("audit: %+v %v", log, err)
		}
		if _, err := db.EndUserSessions(ctx, "nobody", "ada"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("an unknown user: %v", err)
		}
	})
	t.Run("EndIdle", func(t *testing.T) {
		old := start("ada")
		c.Add(time.Hour)
		fresh := start("ada")
		n, err := db.EndIdleSessions(ctx, c.Now().Add(-30*time.Minute))
		if err != nil || n != 1 || alive(old) || !alive(fresh) {
			t.Fatalf("ended %d idle: %v; old alive %v, fresh alive %v", n, err, alive(old), alive(fresh))
		}
	})
}
