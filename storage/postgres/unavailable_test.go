package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookdedup/hookdedup/storage"
	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestWrites_DatabaseCannotTakeThem: a write that the server cannot take now, and of
// which nothing is stored (the server turned read-only, as a standby left behind by a
// failover is; no connection to be had), returns an error wrapping ErrWriteTimeout,
// which the console answers with 503 and "retry later", as on SQLite when its lock is
// held: not an internal error.
func TestWrites_DatabaseCannotTakeThem(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	// The busy timeout is how long a write with no connection to be had is tried again.
	db, err := postgres.Open(ctx, url, postgres.Options{BusyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin := postgrestest.Connect(t, url)
	user := func(name string) error {
		_, err := db.CreateUser(ctx, storage.User{Name: name, Role: storage.RoleViewer, PasswordHash: "x"}, "test")
		return err
	}
	if err := user("before"); err != nil {
		t.Fatal(err)
	}
	// The server ends every connection (a restart, an administrator): the pool's next
	// use of one finds it ended, and the write is made on a new one.
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if err := user("after-restart"); err != nil {
		t.Errorf("create user once the server ended the pool's connections: %v", err)
	}
	// The database turns read-only; the pool's connections are ended, so that new ones
	// take the setting.
	if _, err := admin.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(context.WithoutCancel(ctx), `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET default_transaction_read_only', current_database()); END $$`)
	})
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if err := user("read-only"); !errors.Is(err, storage.ErrWriteTimeout) {
		t.Errorf("create user in a read-only database: %v, want one wrapping ErrWriteTimeout", err)
	}
	if _, err := db.ReleaseKey(ctx, storage.Release{Source: "ota", Key: "k", Actor: "ann", Reason: "r"}); !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrWriteTimeout) {
		t.Errorf("release in a read-only database: %v", err)
	}
	if _, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "r", Kind: "k", Channels: []string{"ops"}}, db.Now()); !errors.Is(err, storage.ErrWriteTimeout) {
		t.Errorf("open alert in a read-only database: %v, want one wrapping ErrWriteTimeout", err)
	}

	// No connection to be had: the database refuses them. (The setting is changed
	// from another database: the server refuses it from the one it closes.)
	if _, err := admin.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET default_transaction_read_only', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := admin.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	other, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	other.Path = "/postgres"
	server := postgrestest.Connect(t, other.String())
	if _, err := server.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Exec(context.WithoutCancel(ctx), `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS true`)
	})
	if _, err := server.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
		t.Fatal(err)
	}
	if err := user("unreachable"); !errors.Is(err, storage.ErrWriteTimeout) {
		t.Errorf("create user with no connection to be had: %v, want one wrapping ErrWriteTimeout", err)
	}
}

// TestWrites_BusyTimeout: a write that waits past the busy timeout for a row another
// session holds (another replica's transaction, or one left open) ends with an error
// wrapping ErrWriteTimeout (503, retry later), as on SQLite, instead of waiting for as
// long as the row is held, with its caller.
func TestWrites_BusyTimeout(t *testing.T) {
	ctx := context.Background()
	url := postgrestest.NewDatabase(t)
	db, err := postgres.Open(ctx, url, postgres.Options{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := &storage.Delivery{Source: "ota", Status: 200, Key: "k", KeyMethod: "event_id", PayloadHash: "h", Body: []byte(`{}`)}
	if err := db.Record(ctx, d, storage.ClaimOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	other := postgrestest.Connect(t, url)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM claims WHERE source = 'ota' AND key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// The waits below end by the busy timeout; this bound only keeps a test of code that
	// waits on from hanging.
	bounded, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err = db.ReleaseKey(bounded, storage.Release{Source: "ota", Key: "k", Actor: "ann", Reason: "r", StuckBefore: db.Now().Add(time.Hour)})
	if !errors.Is(err, storage.ErrWriteTimeout) {
		t.Errorf("release of a key held past the busy timeout: %v, want one wrapping ErrWriteTimeout", err)
	}

	// Any write waiting for a row another session holds: an alert acknowledged.
	a, _, err := db.OpenAlert(ctx, storage.Alert{Rule: "r", Kind: "k", Channels: []string{"ops"}}, db.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM alerts WHERE id = $1 FOR UPDATE`, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AcknowledgeAlert(bounded, a.ID, "ann", db.Now()); !errors.Is(err, storage.ErrWriteTimeout) {
		t.Errorf("acknowledge an alert held past the busy timeout: %v, want one wrapping ErrWriteTimeout", err)
	}
}

// TestRecord_RollbackUnanswered: a server that stops answering as intake rolls back a
// failed transaction (a network that drops packets rather than refusing them) holds
// the writer for rollbackTimeout at most: the connection is closed, which rolls the
// transaction back too, and the next deliveries are written on another.
func TestRecord_RollbackUnanswered(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	// Every connection of the engine goes through a proxy that swallows a rollback and
	// everything after it on that connection, answering nothing and closing nothing.
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	p := newSwitchProxy(t, u.Host, true)
	u.Host = p.addr
	db, err := postgres.Open(ctx, u.String(), postgres.Options{BusyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin := postgrestest.Connect(t, url)
	if _, err := admin.Exec(ctx, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.key = 'refused' THEN
		RAISE EXCEPTION 'refused by the test';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER refuse BEFORE INSERT ON claims FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
		t.Fatal(err)
	}

	if err := db.Record(ctx, testDelivery("refused"), day); err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("the refused delivery: %v", err)
	}
	d := testDelivery("after")
	if err := db.Record(ctx, d, day); err != nil || d.Outcome != storage.Accepted {
		t.Errorf("the next delivery, once the rollback went unanswered: %v, %s", err, d.Outcome)
	}
}

// TestRecord_OutageKeepsNoRequestPastItsDeadline: while the server is down, intake
// tries a batch again until the latest deadline of its requests, but a request whose
// own deadline passes meanwhile, nothing of it stored, is answered then, not held until
// its batch-mates' deadline. Here R1 (its caller's deadline a few seconds away) shares
// a batch with R2 (the busy timeout, 20 s), and the server refuses every connection: R1
// must be answered before the writer has tried eight more times past its deadline.
func TestRecord_OutageKeepsNoRequestPastItsDeadline(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	p := newSwitchProxy(t, u.Host, false)
	u.Host = p.addr
	db, err := postgres.Open(ctx, u.String(), postgres.Options{BusyTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Record(ctx, testDelivery("warm"), day); err != nil {
		t.Fatal(err)
	}

	p.down()
	// R0 keeps the writer busy while R1 and R2 queue behind it, to be taken together.
	ctx0, cancel0 := context.WithTimeout(ctx, 3*time.Second)
	defer cancel0()
	r0 := make(chan error, 1)
	go func() { r0 <- db.Record(ctx0, testDelivery("r0"), day) }()
	for i := 0; p.refused.Load() == 0; i++ {
		if i == 3000 {
			t.Fatal("the writer never tried to connect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx1, cancel1 := context.WithTimeout(ctx, 6*time.Second)
	defer cancel1()
	r1, r2 := make(chan error, 1), make(chan error, 1)
	go func() { r1 <- db.Record(ctx1, testDelivery("r1"), day) }()
	go func() { r2 <- db.Record(ctx, testDelivery("r2"), day) }()
	for i := 0; postgres.QueuedRecords(db) < 2; i++ {
		select {
		case <-r0:
			t.Fatal("R0's batch ended before R1 and R2 were queued behind it")
		default:
		}
		if i == 3000 {
			t.Fatal("R1 and R2 never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-r0; err == nil {
		t.Fatal("R0 stored with the server down")
	}

	<-ctx1.Done() // R1's deadline has passed; nothing of it can have been stored
	after := p.refused.Load()
	held := false
wait:
	for i := 0; ; i++ {
		select {
		case err := <-r1:
			t.Logf("R1 answered: %v", err)
			break wait
		default:
		}
		if p.refused.Load() >= after+8 {
			held = true
			break
		}
		if i == 20000 {
			t.Fatal("the writer stopped trying")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if held {
		t.Errorf("R1 still unanswered %d connection attempts after its deadline passed: held for R2's deadline",
			p.refused.Load()-after)
	}
	p.up()
	if held {
		t.Logf("R1 once the server is back: %v (after its caller's deadline)", <-r1)
	}
	if err := <-r2; err != nil {
		t.Errorf("R2 once the server is back: %v", err)
	}
}

// switchProxy forwards 127.0.0.1 connections to a PostgreSQL server until down: it
// then closes every connection it forwards and accepts new ones only to close them at
// once (a server that refuses), counting them, until up. With swallowRollbacks, once a
// client sends a simple query "rollback" on a connection, the proxy forwards nothing
// more of it and answers nothing (a network that drops packets), until the client
// closes it or says goodbye (the pool shutting down, which then ends at once rather
// than at pgx's timeout).
type switchProxy struct {
	addr             string
	swallowRollbacks bool
	refused          atomic.Int64
	mu               sync.Mutex
	isDown           bool
	live             []net.Conn
}

func newSwitchProxy(t *testing.T, target string, swallowRollbacks bool) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{addr: ln.Addr().String(), swallowRollbacks: swallowRollbacks}
	t.Cleanup(func() {
		ln.Close()
		p.down()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.isDown {
				p.mu.Unlock()
				p.refused.Add(1)
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.live = append(p.live, c, s)
			p.mu.Unlock()
			go func() { io.Copy(c, s); c.Close() }()
			go func() { p.forward(s, c); s.Close() }()
		}
	}()
	return p
}

func (p *switchProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = true
	for _, c := range p.live {
		c.Close()
	}
	p.live = nil
}

func (p *switchProxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = false
}

// forward copies what the client c sends to the server s, swallowing from a rollback on
// when p.swallowRollbacks.
func (p *switchProxy) forward(s, c net.Conn) {
	if !p.swallowRollbacks {
		io.Copy(s, c)
		return
	}
	buf := make([]byte, 64<<10)
	swallow := false
	for {
		n, err := c.Read(buf)
		if swallow && bytes.Contains(buf[:n], []byte("X\x00\x00\x00\x04")) {
			c.Close()
			return
		}
		if n > 0 && !swallow {
			if swallow = bytes.Contains(buf[:n], []byte("rollback\x00")); !swallow {
				if _, err := s.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
