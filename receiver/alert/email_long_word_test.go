package alert_test

import (
	"context"
	"errors"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestEmail_LongWordInSubjectFolded: a rule named in plain ASCII without a blank, at
// length (a name made of words joined by dashes), gives a Subject that no blank can
// fold to the 998 characters a line of a message may hold: a server refuses such a
// message (aiosmtpd: "500 Line too long"), every attempt alike. It goes encoded
// (RFC 2047), in words that fold, and reads back as written.
func TestEmail_LongWordInSubjectFolded(t *testing.T) {
	s := startSMTP(t)
	f := newFixture(t)
	rule := strings.TrimSuffix(strings.Repeat("reservations-not-forwarded-to-the-pms-", 30), "-")
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.addr, Username: "alerts",
		Secrets: []string{smtpPassword}, From: "hookdedup <alerts@hotel.example>", To: []string{"ops@hotel.example"},
		CAFile: s.caFile, Timeout: 30 * time.Second, MaxAttempts: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.engine(t, []alert.Rule{{Name: rule, Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{c}, func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("database is locked") }
		})
	f.evaluate(t, e)
	msgs := s.messages(t)
	if len(msgs) != 1 {
		a := f.alerts(t)
		t.Fatalf("server took %d messages, want 1 (last error %q)", len(msgs), a[0].LastNotificationError)
	}
	head, _, _ := strings.Cut(msgs[0].Data, "\r\n\r\n")
	for line := range strings.SplitSeq(head, "\r\n") {
		if len(line) > 998 {
			t.Errorf("header line of %d characters, want 998 at most", len(line))
		}
	}
	m, err := mail.ReadMessage(strings.NewReader(msgs[0].Data))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if want := "hookdedup alert opened: " + rule; err != nil || subject != want {
		t.Errorf("Subject read back %q (%v), want %q", subject, err, want)
	}
}
