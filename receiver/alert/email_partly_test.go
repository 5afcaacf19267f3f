package alert_test

import (
	"context"
	"errors"
	"strings"
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
	s := startRcptServer(t, refusing("gone@hotel.example"))
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
	e.WaitDirect()
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

// TestEmail_TransientRecipientRefusalRetried: one recipient's mailbox answers 450 (a
// refusal for now, RFC 5321 4yz) at the first attempt. The attempt fails before the
// message is sent to anyone, and the retry reaches every recipient once; only a refusal
// for good (5yz) leaves a recipient out.
func TestEmail_TransientRecipientRefusalRetried(t *testing.T) {
	s := startRcptServer(t, busyOnce("night@hotel.example"))
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
	got := s.deliveredTo()
	if !strings.Contains(strings.Join(got, " "), "night@hotel.example") {
		a := f.alerts(t)[0]
		t.Errorf("night@hotel.example, refused with 450 (try again later) once, never got the alert: delivered to %v; "+
			"notifications: %d sent, %d failed; want it tried again while the channel has attempts left",
			got, a.SentNotifications, a.FailedNotifications)
	}
}

// TestEmail_PartlySentCountsAsSentDespiteAStop: serve stops (ctx cancelled) once the
// mail server has taken the message for ops@, having refused gone@ for good (550),
// and before the send has ended (at its QUIT). The notification counts as sent, as it
// does without a stop: handed back as cut short, the next start would send it to
// ops@ a second time.
func TestEmail_PartlySentCountsAsSentDespiteAStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startRcptServerQuit(t, refusing("gone@hotel.example"), cancel)
	f := newFixture(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.ln.Addr().String(),
		From: "alerts@hotel.example", To: []string{"gone@hotel.example", "ops@hotel.example"},
		CAFile: s.caFile, MaxAttempts: 3, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("ping: database is locked") }
		})
	if err := e.Evaluate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SendDue(ctx); err != nil { // the send during which serve stops
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("the server never saw the client's QUIT")
	}
	if got := s.deliveredTo(); len(got) != 1 || got[0] != "ops@hotel.example" {
		t.Fatalf("before the restart the server delivered to %v; want ops@ once", got)
	}
	if a := f.alerts(t)[0]; a.SentNotifications != 1 || a.PendingNotifications != 0 {
		t.Errorf("notification: %d sent, %d pending; want it sent", a.SentNotifications, a.PendingNotifications)
	}
	// serve starts again.
	for range 3 {
		f.clock.Add(10 * time.Second)
		f.evaluate(t, e)
	}
	if got := s.deliveredTo(); len(got) != 1 {
		t.Errorf("after the restart the server delivered to %v; want ops@ once (the first attempt reached ops@ and "+
			"counts as sent, stop or not)", got)
	}
}
