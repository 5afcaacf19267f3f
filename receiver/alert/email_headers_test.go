package alert_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// headerBlock returns the header lines of a message as the server took it (unfolded
// lines, up to the blank line).
func headerBlock(data string) []string {
	head, _, _ := strings.Cut(strings.ReplaceAll(data, "\r\n", "\n"), "\n\n")
	return strings.Split(head, "\n")
}

// TestEmail_ToHeaderNonASCIIEncoded: a recipient written with a display name beyond
// ASCII (to = ["Réception <ops@hotel.example>"]) is written into the To header
// RFC 2047-encoded, as the Subject is: a server that did not offer SMTPUTF8 (aiosmtpd
// by default does not) takes only ASCII headers.
func TestEmail_ToHeaderNonASCIIEncoded(t *testing.T) {
	s := startSMTP(t)
	f := newFixture(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.addr, Username: "alerts",
		Secrets: []string{smtpPassword}, From: "hookdedup <alerts@hotel.example>", To: []string{"Réception Hôtel <ops@hotel.example>"},
		CAFile: s.caFile, Timeout: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("database is locked") }
		})
	f.evaluate(t, e)
	msgs := s.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("server took %d messages, want 1; log:\n%s", len(msgs), f.logs.String())
	}
	for _, line := range headerBlock(msgs[0].Data) {
		for _, r := range line {
			if r > '~' {
				t.Errorf("header line %q holds a character beyond ASCII, sent without SMTPUTF8; want it RFC 2047-encoded", line)
				break
			}
		}
	}
}

// msgID is RFC 5322's msg-id in its usual dot-atom form: <left@right>, no space.
var msgID = regexp.MustCompile(`^Message-ID: <[A-Za-z0-9!#$%&'*+/=?^_{|}~.-]+@[A-Za-z0-9.-]+>$`)

// TestEmail_DirectMessageIDWithChannelName: while the database cannot store an alert,
// its channels are told straight away, and the email's Message-ID is made of the
// channel's name. A channel name may hold a space or a character beyond ASCII ("ops
// mail", "équipe"): the Message-ID is still a msg-id.
func TestEmail_DirectMessageIDWithChannelName(t *testing.T) {
	s := startSMTP(t)
	f := newFixture(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "ops mail", Type: alert.TypeEmail, SMTPAddr: s.addr, Username: "alerts",
		Secrets: []string{smtpPassword}, From: "alerts@hotel.example", To: []string{"ops@hotel.example"},
		CAFile: s.caFile, Timeout: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"ops mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Store = unstorableAlerts{f.db, &down}
			c.Ready = func(context.Context) error { return errors.New("disk I/O error") }
		})
	_ = e.Evaluate(context.Background()) // cannot store it: told straight away
	e.WaitDirect()
	msgs := s.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("server took %d messages, want 1; log:\n%s", len(msgs), f.logs.String())
	}
	found := false
	for _, line := range headerBlock(msgs[0].Data) {
		if strings.HasPrefix(line, "Message-ID:") {
			found = true
			if !msgID.MatchString(line) {
				t.Errorf("%q is not a valid msg-id (RFC 5322 3.6.4)", line)
			}
		}
	}
	if !found {
		t.Errorf("no Message-ID in:\n%s", msgs[0].Data)
	}
}

// TestEmail_FromKeepsDisplayName: the README's own example configures
// from = "hookdedup <alerts@example.com>": the From header carries the display name
// the operator wrote, which mail clients show as the sender and filter on.
func TestEmail_FromKeepsDisplayName(t *testing.T) {
	s := startSMTP(t)
	f := newFixture(t)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{s.channel(t, "mail")}, // from = "hookdedup <alerts@hotel.example>"
		func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("database is locked") }
		})
	f.evaluate(t, e)
	msgs := s.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("server took %d messages, want 1; log:\n%s", len(msgs), f.logs.String())
	}
	for _, line := range headerBlock(msgs[0].Data) {
		if strings.HasPrefix(line, "From:") && line != `From: "hookdedup" <alerts@hotel.example>` && line != `From: hookdedup <alerts@hotel.example>` {
			t.Errorf("%q: want the configured sender, hookdedup <alerts@hotel.example>", line)
		}
	}
}
