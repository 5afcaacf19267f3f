package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// holdLock takes the advisory lock lock for conn's session, so that every transaction
// that takes it waits there, until the returned release.
func holdLock(t *testing.T, conn *pgx.Conn, lock int64) (release func()) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, lock); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := conn.Exec(t.Context(), `SELECT pg_advisory_unlock($1)`, lock); err != nil {
			t.Fatal(err)
		}
	}
}

// waitUntil polls until done reports true or n backends of conn's database wait for a
// lock, whichever comes first, for a minute at most.
func waitUntil(t *testing.T, conn *pgx.Conn, n int, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n || done() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends wait for a lock after a minute, want %d", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func never() bool { return false }

// TestLastAdmin_TwoReplicas: two replicas each take one of the last two admins away at
// once; both have counted two admins before either commits (the first is held before
// its commit, at the audit log's lock, while the second runs). One of them must be
// refused, and one admin stays.
func TestLastAdmin_TwoReplicas(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	a, b := open(t, url), open(t, url)
	ctx := t.Context()
	for _, name := range []string{"ada", "bo"} {
		if _, err := a.CreateUser(ctx, storage.User{Name: name, Role: storage.RoleAdmin, PasswordHash: "h"}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	conn := postgrestest.Connect(t, url)
	release := holdLock(t, conn, postgres.LockID(a, postgres.AuditLock))
	errs := make(chan error, 2)
	go func() {
		_, err := a.SetUserRole(ctx, "ada", storage.RoleViewer, "bo")
		errs <- err
	}()
	waitUntil(t, conn, 1, never)
	go func() { errs <- b.DeleteUser(ctx, "bo", "ada") }()
	waitUntil(t, conn, 2, func() bool { return len(errs) > 0 })
	release()
	var refused, done int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			done++
		case errors.Is(err, storage.ErrLastAdmin):
			refused++
		default:
			t.Fatal(err)
		}
	}
	users, err := a.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var admins []string
	for _, u := range users {
		if u.Role == storage.RoleAdmin {
			admins = append(admins, u.Name)
		}
	}
	if done != 1 || refused != 1 || len(admins) != 1 {
		t.Fatalf("%d done, %d refused, admins left %q; want one of each and one admin", done, refused, admins)
	}
}

// TestCreateSession_PasswordChangedMeanwhile: a sign-in on one replica checked the old
// password while another replica changes it; the change has ended the user's sessions
// but not committed yet. The session must not outlive the old password.
func TestCreateSession_PasswordChangedMeanwhile(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	a, b := open(t, url), open(t, url)
	ctx := t.Context()
	u, err := a.CreateUser(ctx, storage.User{Name: "ana", Role: storage.RoleViewer, PasswordHash: "old"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	conn := postgrestest.Connect(t, url)
	release := holdLock(t, conn, postgres.LockID(a, postgres.AuditLock))
	changed := make(chan error, 1)
	go func() { changed <- a.SetUserPassword(ctx, "ana", "new", "ana") }()
	waitUntil(t, conn, 1, never)
	type started struct {
		id  string
		err error
	}
	signIn := make(chan started, 1)
	go func() {
		id, err := b.CreateSession(ctx, u, time.Now())
		signIn <- started{id, err}
	}()
	waitUntil(t, conn, 2, func() bool { return len(signIn) > 0 })
	release()
	if err := <-changed; err != nil {
		t.Fatal(err)
	}
	s := <-signIn
	switch {
	case s.err == nil:
		if _, err := b.SessionByID(ctx, s.id); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a session made with the old password outlived its change: %v", err)
		}
	case !errors.Is(s.err, storage.ErrNotFound):
		t.Fatal(s.err)
	}
}

// TestRevokeToken_TwoReplicas: two replicas revoke one token at once; it is revoked,
// and audited, once: the second finds it revoked.
func TestRevokeToken_TwoReplicas(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	a, b := open(t, url), open(t, url)
	ctx := t.Context()
	if _, err := a.CreateUser(ctx, storage.User{Name: "vic", Role: storage.RoleViewer, PasswordHash: "h"}, "test"); err != nil {
		t.Fatal(err)
	}
	_, tok, err := a.CreateToken(ctx, "vic", "ci", "vic")
	if err != nil {
		t.Fatal(err)
	}
	conn := postgrestest.Connect(t, url)
	release := holdLock(t, conn, postgres.LockID(a, postgres.AuditLock))
	errs := make(chan error, 2)
	go func() { errs <- a.RevokeToken(ctx, tok.ID, "", "admin") }()
	waitUntil(t, conn, 1, never)
	go func() { errs <- b.RevokeToken(ctx, tok.ID, "vic", "vic") }()
	waitUntil(t, conn, 2, func() bool { return len(errs) > 0 })
	release()
	var revoked, notFound int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			revoked++
		case errors.Is(err, storage.ErrNotFound):
			notFound++
		default:
			t.Fatal(err)
		}
	}
	log, err := a.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var audited int
	for _, e := range log {
		if e.Action == "revoke token" {
			audited++
		}
	}
	if revoked != 1 || notFound != 1 || audited != 1 {
		t.Fatalf("%d revoked, %d not found, %d audit rows; want one of each", revoked, notFound, audited)
	}
}

// TestAuditChain_TwoReplicas: two replicas write audit rows at once through every kind
// of writer of this part, while a third handle checks the chain again and again: every
// check finds the chain whole, and at the end it holds every row, numbered 1 to n
// without a gap or a repeat: it never forked.
func TestAuditChain_TwoReplicas(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	a, b, checker := open(t, url), open(t, url), open(t, url)
	ctx := t.Context()
	const writers, each = 6, 10 // each write appends two rows
	var wg sync.WaitGroup
	for w := range writers {
		db := a
		if w%2 == 1 {
			db = b
		}
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("u%d-%d", w, i)
				if _, err := db.CreateUser(ctx, storage.User{Name: name, Role: storage.RoleViewer, PasswordHash: "h"}, "test"); err != nil {
					t.Error(err)
					return
				}
				var err error
				switch i % 3 {
				case 0:
					err = db.AppendAudit(ctx, storage.AuditEntry{Actor: name, Action: "reveal secret", Source: "ota"})
				case 1:
					_, _, err = db.CreateToken(ctx, name, "ci", name)
				case 2:
					_, err = db.SetUserRole(ctx, name, storage.RoleOperator, "test")
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	checks := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		var last int64
		for {
			select {
			case <-stop:
				checks <- nil
				return
			default:
			}
			c, err := checker.VerifyAudit(ctx, storage.AuditAnchor{})
			if err == nil && (c.Break != nil || c.Rows < last) {
				err = fmt.Errorf("a check while writing: %+v (%+v), after %d rows", c, c.Break, last)
			}
			if err == nil {
				c, err = checker.AuditChain(ctx)
				if err == nil && c.Break != nil {
					err = fmt.Errorf("the console's check while writing: %+v (%+v)", c, c.Break)
				}
			}
			if err != nil {
				checks <- err
				return
			}
			last = c.Rows
		}
	}()
	wg.Wait()
	close(stop)
	if err := <-checks; err != nil {
		t.Fatal(err)
	}
	const rows = writers * each * 2
	c, err := a.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || c.Break != nil || c.Rows != rows || c.LastID != rows {
		t.Fatalf("verify = %+v, %v; want %d rows chained", c, err, rows)
	}
	var next int64 = 1
	err = b.AuditRows(ctx, func(e storage.AuditEntry) error {
		if e.ID != next {
			return fmt.Errorf("row %d where row %d belongs", e.ID, next)
		}
		next++
		return nil
	})
	if err != nil || next != rows+1 {
		t.Fatalf("audit rows: %v, %d read, want %d", err, next-1, rows)
	}
}

// TestVerifyAudit_Edited: a row changed in the database breaks the chain at that row,
// for the whole check and the console's, whichever replica makes it.
func TestVerifyAudit_Edited(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	a, b := open(t, url), open(t, url)
	ctx := t.Context()
	for i := range 5 {
		if err := a.AppendAudit(ctx, storage.AuditEntry{Actor: "ana", Action: "reveal secret", Reason: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := b.AuditChain(ctx); err != nil || c.Break != nil || c.Rows != 5 {
		t.Fatalf("before the edit: %+v, %v", c, err)
	}
	if _, err := postgrestest.Connect(t, url).Exec(ctx, `UPDATE audit_log SET reason = 'nothing happened' WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	c, err := a.VerifyAudit(ctx, storage.AuditAnchor{})
	if err != nil || c.Break == nil || c.Break.ID != 3 || c.Break.Kind != storage.AuditEdited || c.LastID != 2 {
		t.Fatalf("verify = %+v (%+v), %v; want an edit of row 3", c, c.Break, err)
	}
	// The console's mark is row 5, whose hash was left alone: it sees the edit once it
	// starts again from the genesis, as a fresh replica does.
	c, err = open(t, url).AuditChain(ctx)
	if err != nil || c.Break == nil || c.Break.ID != 3 || c.Break.Kind != storage.AuditEdited {
		t.Fatalf("the console's check = %+v (%+v), %v; want an edit of row 3", c, c.Break, err)
	}
}

// TestEndIdleSessions_Busy: while another replica sweeps idle sessions (holds the
// sweep's lock), a sweep does nothing and says so without an error; then it sweeps.
func TestEndIdleSessions_Busy(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	db := open(t, url)
	ctx := t.Context()
	u, err := db.CreateUser(ctx, storage.User{Name: "ana", Role: storage.RoleViewer, PasswordHash: "h"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-time.Hour)
	id, err := db.CreateSession(ctx, u, then)
	if err != nil {
		t.Fatal(err)
	}
	release := holdLock(t, postgrestest.Connect(t, url), postgres.LockID(db, postgres.SweepSessionsLock))
	if n, err := db.EndIdleSessions(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("while another sweeps: %d, %v; want 0, nil", n, err)
	}
	if _, err := db.SessionByID(ctx, id); err != nil {
		t.Fatalf("the session after a sweep that did nothing: %v", err)
	}
	release()
	if n, err := db.EndIdleSessions(ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("after: %d, %v; want 1", n, err)
	}
}

// TestCreateUser_UnstorableName: a user name PostgreSQL's text cannot hold is refused
// with an error that says why, not the server's encoding error.
func TestCreateUser_UnstorableName(t *testing.T) {
	db := open(t, postgrestest.NewDatabase(t))
	for _, name := range []string{"ana\x00", "ana\xff"} {
		_, err := db.CreateUser(t.Context(), storage.User{Name: name, Role: storage.RoleViewer, PasswordHash: "h"}, "test")
		if err == nil || !strings.Contains(err.Error(), "NUL byte or bytes that are not UTF-8") {
			t.Errorf("create user %q: %v, want a refusal naming the bytes", name, err)
		}
	}
}

// TestLoginThrottle_NoDeadlock: sign-ins of one name from one address, failed and
// successful, on two replicas at once, take the same two rows (the address's and the
// pair's): they must take them in one order, or PostgreSQL finds deadlocks and makes
// them wait a second each before it aborts one.
func TestLoginThrottle_NoDeadlock(t *testing.T) {
	url := postgrestest.NewDatabase(t)
	a, b := open(t, url), open(t, url)
	ctx := t.Context()
	free := storage.Throttle{Free: 1 << 30, First: time.Second, Max: time.Minute, Forget: time.Hour}
	pair, addr := "pair:10.0.0.1 ana", "addr:10.0.0.1"
	policy := map[string]storage.Throttle{pair: free, addr: free}
	var wg sync.WaitGroup
	for w := range 6 {
		db := a
		if w%2 == 1 {
			db = b
		}
		wg.Go(func() {
			for range 10 {
				if _, err := db.LoginAttempt(ctx, time.Now(), policy); err != nil {
					t.Error(err)
					return
				}
				if err := db.LoginSucceeded(ctx, pair, addr); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var deadlocks int64
	if err := postgrestest.Connect(t, url).QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&deadlocks); err != nil {
		t.Fatal(err)
	}
	if deadlocks != 0 {
		t.Fatalf("%d deadlocks", deadlocks)
	}
}
