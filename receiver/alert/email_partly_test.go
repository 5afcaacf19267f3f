package alert_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestEmail_DirectPartlySentNotResent: the database cannot store the database_not_ready
// alert, so the engine tells the channels straight away, with up to three tries. One of
// the on-call team's mailboxes is gone (550); the server takes the message for the
// others at the first try. That is a message sent: not sent twice more to those who
// have it.
func TestEmail_DirectPartlySentNotResent(t *testing.T) {
	s := startRcptServer(t, "gone@hotel.example")
	f := newFixture(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.ln.Addr().String(),
		From: "alerts@hotel.example", To: []string{"gone@hotel.example", "ops@hotel.example"},
		CAFile: s.caFile, MaxAttempts: 3, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Store = unstorableAlerts{f.db, &down}
			c.Ready = func(context.Context) error { return errors.New("ping: disk I/O error") }
		})
	_ = e.Evaluate(context.Background()) // cannot store it: told straight away
	got := 0
	for _, to := range s.deliveredTo() {
		if to == "ops@hotel.example" {
			got++
		}
	}
	if got != 1 {
		t.Errorf("ops@hotel.example got the database_not_ready alert %d times; want once (the server took it at the first try, "+
			"only gone@ was refused)\nlog:\n%s", got, f.logs.String())
	}
}

// tempRcptServer is an SMTP server with STARTTLS that answers one recipient 450 (a
// transient refusal: mailbox busy, greylisted, over quota for now) on its first
// transaction only, and takes every recipient after.
type tempRcptServer struct {
	ln      net.Listener
	caFile  string
	busy    string
	refused atomic.Int32

	mu        sync.Mutex
	delivered []string
}

func startTempRcptServer(t *testing.T, busy string) *tempRcptServer {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, certFile, keyFile)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tempRcptServer{ln: ln, caFile: certFile, busy: busy}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(conn, cert)
		}
	}()
	return s
}

func (s *tempRcptServer) serve(conn net.Conn, cert tls.Certificate) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var c net.Conn = conn
	r := bufio.NewReader(c)
	fmt.Fprint(c, "220 test ESMTP\r\n")
	var rcpts []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch cmd := strings.TrimSpace(line); {
		case strings.HasPrefix(strings.ToUpper(cmd), "EHLO"):
			if _, ok := c.(*tls.Conn); ok {
				fmt.Fprint(c, "250 test\r\n")
			} else {
				fmt.Fprint(c, "250-test\r\n250 STARTTLS\r\n")
			}
		case strings.EqualFold(cmd, "STARTTLS"):
			fmt.Fprint(c, "220 go ahead\r\n")
			tc := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{cert}})
			if err := tc.Handshake(); err != nil {
				return
			}
			c, r = tc, bufio.NewReader(tc)
		case strings.HasPrefix(strings.ToUpper(cmd), "MAIL FROM:"):
			rcpts = nil
			fmt.Fprint(c, "250 ok\r\n")
		case strings.HasPrefix(strings.ToUpper(cmd), "RCPT TO:"):
			addr := strings.Trim(cmd[len("RCPT TO:"):], "<> ")
			if addr == s.busy && s.refused.Add(1) == 1 {
				fmt.Fprint(c, "450 4.2.1 <"+addr+">: Mailbox temporarily unavailable, try again later\r\n")
				continue
			}
			rcpts = append(rcpts, addr)
			fmt.Fprint(c, "250 ok\r\n")
		case strings.EqualFold(cmd, "DATA"):
			fmt.Fprint(c, "354 go on\r\n")
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
			}
			s.mu.Lock()
			s.delivered = append(s.delivered, rcpts...)
			s.mu.Unlock()
			fmt.Fprint(c, "250 queued\r\n")
		case strings.EqualFold(cmd, "QUIT"):
			fmt.Fprint(c, "221 bye\r\n")
			return
		default:
			fmt.Fprint(c, "250 ok\r\n")
		}
	}
}

// TestEmail_TransientRecipientRefusalRetried: one recipient's mailbox answers 450 (a
// refusal for now, RFC 5321 4yz) at the first attempt. The attempt fails before the
// message is sent to anyone, and the retry reaches every recipient once; only a refusal
// for good (5yz) leaves a recipient out.
func TestEmail_TransientRecipientRefusalRetried(t *testing.T) {
	s := startTempRcptServer(t, "night@hotel.example")
	f := newFixture(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.ln.Addr().String(),
		From: "alerts@hotel.example", To: []string{"ops@hotel.example", "night@hotel.example"},
		CAFile: s.caFile, MaxAttempts: 5, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
		})
	for range 6 { // every attempt the channel has, and then some
		f.evaluate(t, e)
		f.clock.Add(10 * time.Minute)
	}
	s.mu.Lock()
	got := append([]string(nil), s.delivered...)
	s.mu.Unlock()
	if !strings.Contains(strings.Join(got, " "), "night@hotel.example") {
		a := f.alerts(t)[0]
		t.Errorf("night@hotel.example, refused with 450 (try again later) once, never got the alert: delivered to %v; "+
			"notifications: %d sent, %d failed; want it tried again while the channel has attempts left",
			got, a.SentNotifications, a.FailedNotifications)
	}
}
