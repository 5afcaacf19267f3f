package alert_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestAlerts_StopMidSendHandsTheLeaseBack: serve stops (systemctl restart, an upgrade)
// while a notification is being sent to a slow receiver. The attempt is cut short and
// the notification's lease handed back: serve started again at once sends it, rather
// than waiting for the stopped process's five-minute lease to run out.
func TestAlerts_StopMidSendHandsTheLeaseBack(t *testing.T) {
	f := newFixture(t)
	slowSrv, slowGot := hangingHook(t)
	rules := func() []alert.Rule {
		return []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops"}}}
	}
	ready := func(context.Context) error { return errors.New("ping: database is locked") }
	before := f.engine(t, rules(), []*alert.Channel{hangingChannel(t, "ops", slowSrv.URL, 30*time.Second)},
		func(c *alert.Config) { c.Ready, c.Interval = ready, 50*time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); before.Run(ctx) }()
	if _, ok := waitFor(10*time.Second, func() bool { return slowGot.Load() > 0 }); !ok {
		cancel()
		<-done
		t.Fatal("the notification was never sent")
	}
	cancel() // serve stops mid-send
	<-done

	// serve starts again ten seconds later; the receiver answers now.
	f.clock.Add(10 * time.Second)
	h := newHook(t, 0)
	after := f.engine(t, rules(), []*alert.Channel{h.channel(t, "ops")}, func(c *alert.Config) { c.Ready = ready })
	for range 6 { // a minute of evaluations
		f.evaluate(t, after)
		f.clock.Add(10 * time.Second)
	}
	if len(h.payloads()) != 1 {
		a := f.alerts(t)[0]
		t.Errorf("a minute after the restart the channel got %d notifications, want the alert's opening (alert: %d pending, %d sent, last error %q)",
			len(h.payloads()), a.PendingNotifications, a.SentNotifications, a.LastNotificationError)
		f.clock.Add(5 * time.Minute) // the dead process's lease runs out
		f.evaluate(t, after)
		t.Logf("once the stopped process's 5-minute lease ran out: %d notifications", len(h.payloads()))
	}
}

// TestEmail_StopEndsAHangingSend: an email channel's mail server takes the connection
// and never answers (a stalled relay, an implicit-TLS port waiting for a ClientHello).
// serve stops: the SMTP conversation is cut short at once, as a webhook's request is,
// and the notification handed back for the next start; the stop does not wait out the
// channel's timeout (up to 3m59s, past systemd's 90 s before it kills).
func TestEmail_StopEndsAHangingSend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 16)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // never greets, never reads
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	f := newFixture(t)
	const timeout = 8 * time.Second
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: ln.Addr().String(),
		From: "alerts@hotel.example", To: []string{"ops@hotel.example"}, Timeout: timeout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
			c.Interval = 50 * time.Millisecond
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatal("the mail server was never connected to")
	}
	time.Sleep(100 * time.Millisecond) // the client waits for the greeting
	stopped := time.Now()
	cancel() // serve stops
	<-done
	if took := time.Since(stopped); took > 2*time.Second {
		t.Errorf("the alert engine took %v to stop behind a mail server that does not answer (channel timeout %v); want at once",
			took.Round(100*time.Millisecond), timeout)
	}
	if !strings.Contains(f.logs.String(), "left for the next start") {
		t.Errorf("the notification cut short was not handed back for the next start; log:\n%s", f.logs.String())
	}
	if a := f.alerts(t)[0]; a.PendingNotifications != 1 || a.FailedNotifications != 0 {
		t.Errorf("notification: %d pending, %d failed; want it pending, due again at the next start",
			a.PendingNotifications, a.FailedNotifications)
	}
}
