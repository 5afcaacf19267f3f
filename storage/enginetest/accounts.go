package enginetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// TestSettingOrInit_Concurrent: replicas starting together each find a setting unset
// and each make a value of their own, all of them before any stores one; every one of
// them ends with the same value, the one stored.
func TestSettingOrInit_Concurrent(t *testing.T, e Engine) {
	ctx := context.Background()
	a := e.Open(t)
	b := e.Reopen(t, a)
	const replicas = 6
	var made sync.WaitGroup
	made.Add(replicas)
	allMade := make(chan struct{})
	go func() { made.Wait(); close(allMade) }()
	got := make([]string, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		db := a
		if i%2 == 1 {
			db = b
		}
		wg.Go(func() {
			v, err := db.SettingOrInit(ctx, "secret", func() (string, error) {
				made.Done()
				// Bounded, so that an engine that holds a lock while it makes the value
				// fails this test instead of hanging it.
				select {
				case <-allMade:
				case <-time.After(time.Minute):
				}
				return fmt.Sprint("made by ", i), nil
			})
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	stored, err := a.Setting(ctx, "secret")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != stored {
			t.Errorf("replica %d got %q, the stored value is %q", i, v, stored)
		}
	}
}

// TestAccounts_OddBytes: names from outside (a sign-in form, a URL) may hold a NUL
// byte or bytes that are not UTF-8. Looking such a name up finds no one, and a sign-in
// throttled under it or a token labelled with it works as with any other: never an
// error for the request, on any engine.
func TestAccounts_OddBytes(t *testing.T, e Engine) {
	ctx := context.Background()
	db := e.Open(t)
	c := newClock(e, db)
	createUser(t, db, "ana", storage.RoleViewer, "pw")
	for _, odd := range []string{"ana\x00", "ana\xff", "\x00", "\xc3("} {
		if _, err := db.UserByName(ctx, odd); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("user %q: %v, want ErrNotFound", odd, err)
		}
		if err := db.SetUserPassword(ctx, odd, "h", "ana"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("set password of %q: %v, want ErrNotFound", odd, err)
		}
		if _, err := db.EndUserSessions(ctx, odd, "ana"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("end sessions of %q: %v, want ErrNotFound", odd, err)
		}
		if list, err := db.Tokens(ctx, odd); err != nil || len(list) != 0 {
			t.Errorf("tokens of %q: %v, %v; want none", odd, list, err)
		}
		if err := db.RevokeToken(ctx, 1, odd, "ana"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("revoke a token of %q: %v, want ErrNotFound", odd, err)
		}

		scope := "pair:10.0.0.1 " + odd
		policy := map[string]storage.Throttle{scope: {Free: 1, First: time.Minute, Max: time.Hour, Forget: time.Hour}}
		for i, wait := range []bool{false, true} {
			until, err := db.LoginAttempt(ctx, c.Now(), policy)
			if err != nil || until.IsZero() == wait {
				t.Errorf("sign-in %d as %q: until %v, %v; want a wait %v", i+1, odd, until, err, wait)
			}
		}
		if err := db.LoginSucceeded(ctx, scope); err != nil {
			t.Errorf("sign-in as %q succeeded: %v", odd, err)
		}
		if until, err := db.LoginAttempt(ctx, c.Now(), policy); err != nil || !until.IsZero() {
			t.Errorf("sign-in as %q after a success: until %v, %v; want no wait", odd, until, err)
		}
		if err := db.LoginSucceeded(ctx, scope); err != nil {
			t.Error(err)
		}

		tok, _, err := db.CreateToken(ctx, "ana", "ci "+odd, "ana")
		if err != nil {
			t.Errorf("a token named %q: %v", "ci "+odd, err)
			continue
		}
		if u, err := db.TokenUser(ctx, tok); err != nil || u.Name != "ana" {
			t.Errorf("the token named %q: %+v, %v", "ci "+odd, u, err)
		}
	}
	if c, err := db.VerifyAudit(ctx, storage.AuditAnchor{}); err != nil || c.Break != nil {
		t.Fatalf("the audit chain after odd names: %+v, %v", c, err)
	}
}
