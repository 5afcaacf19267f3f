package postgres_test

import (
	"context"
	"io"
	"net"
	neturl "net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage/postgres"
	"github.com/hookdedup/hookdedup/storage/postgrestest"
)

// TestRecord_OutageKeepsNoRequestPastItsDeadline: while the server is down, intake now
// tries a batch again until the latest deadline of its requests; but a request whose
// own deadline passes meanwhile, nothing of it stored, must be answered then (the
// writer goes by each request's deadline: record.go), not held until its batch-mates'
// deadline. Here R1 (its caller's deadline a few seconds away) shares a batch with R2
// (the busy timeout, 20 s): with the server refusing every connection, R1 is still
// unanswered after the writer has tried eight more times past R1's deadline; it is
// answered only when R2's deadline ends the loop, or the server comes back. Under a
// sustained outage every request waits up to twice the busy timeout this way, where
// before the retries a lost connection was answered 503 at once.
func TestRecord_OutageKeepsNoRequestPastItsDeadline(t *testing.T) {
	ctx := t.Context()
	url := postgrestest.NewDatabase(t)
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	p := newSwitchProxy(t, u.Host)
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
// once (a server that refuses), counting them, until up.
type switchProxy struct {
	addr    string
	refused atomic.Int64
	mu      sync.Mutex
	isDown  bool
	live    []net.Conn
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{addr: ln.Addr().String()}
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
			go func() { io.Copy(s, c); s.Close() }()
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
