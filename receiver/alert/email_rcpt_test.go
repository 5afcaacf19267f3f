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

// rcptServer is an SMTP server with STARTTLS that answers each RCPT TO as refuse says
// (the refusal line, or "" to take the recipient), recording which recipients each
// message it accepted went to.
type rcptServer struct {
	ln     net.Listener
	caFile string
	refuse func(addr string) string
	// quit, if set, is called when a client sends QUIT, before the server answers:
	// the message, if any, has been taken.
	quit func()

	mu        sync.Mutex
	delivered [][]string
	helos     []string // the names the client gave in EHLO, in order
}

// refusing refuses addr for good (550, a mailbox that no longer exists).
func refusing(addr string) func(string) string {
	return func(a string) string {
		if a == addr {
			return "550 5.1.1 <" + a + ">: Recipient address rejected: User unknown"
		}
		return ""
	}
}

// busyOnce refuses addr for now (450: a mailbox busy, greylisted, over quota) the first
// time only.
func busyOnce(addr string) func(string) string {
	var refused atomic.Int32
	return func(a string) string {
		if a == addr && refused.Add(1) == 1 {
			return "450 4.2.1 <" + a + ">: Mailbox temporarily unavailable, try again later"
		}
		return ""
	}
}

func startRcptServer(t *testing.T, refuse func(addr string) string) *rcptServer {
	t.Helper()
	return startRcptServerQuit(t, refuse, nil)
}

// startRcptServerQuit is startRcptServer calling quit at each QUIT.
func startRcptServerQuit(t *testing.T, refuse func(addr string) string, quit func()) *rcptServer {
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
	s := &rcptServer{ln: ln, caFile: certFile, refuse: refuse, quit: quit}
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

func (s *rcptServer) serve(conn net.Conn, cert tls.Certificate) {
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
			s.mu.Lock()
			s.helos = append(s.helos, strings.TrimSpace(cmd[len("EHLO"):]))
			s.mu.Unlock()
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
			if no := s.refuse(addr); no != "" {
				fmt.Fprint(c, no+"\r\n")
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
			s.delivered = append(s.delivered, rcpts)
			s.mu.Unlock()
			fmt.Fprint(c, "250 queued\r\n")
		case strings.EqualFold(cmd, "QUIT"):
			if s.quit != nil {
				s.quit()
			}
			fmt.Fprint(c, "221 bye\r\n")
			return
		default:
			fmt.Fprint(c, "250 ok\r\n")
		}
	}
}

func (s *rcptServer) deliveredTo() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, d := range s.delivered {
		out = append(out, d...)
	}
	return out
}

// TestEmail_OneRefusedRecipientLeftOut: an email channel sends to the on-call team; one
// of them left and their mailbox is gone (550 User unknown). The message goes to the
// others, and the refusal is told, not every attempt stopped at that RCPT TO.
func TestEmail_OneRefusedRecipientLeftOut(t *testing.T) {
	s := startRcptServer(t, refusing("gone@hotel.example"))
	f := newFixture(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.ln.Addr().String(),
		From: "alerts@hotel.example", To: []string{"gone@hotel.example", "ops@hotel.example", "night@hotel.example"},
		CAFile: s.caFile, MaxAttempts: 3, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
		})
	for range 5 { // every attempt the channel has, and then some
		f.evaluate(t, e)
		f.clock.Add(time.Minute)
	}
	got := s.deliveredTo()
	for _, want := range []string{"ops@hotel.example", "night@hotel.example"} {
		if !strings.Contains(strings.Join(got, " "), want) {
			a := f.alerts(t)[0]
			t.Errorf("%s never got the alert (delivered to %v; notification: %d failed, last error %q)",
				want, got, a.FailedNotifications, a.LastNotificationError)
		}
	}
}
