package alert_test

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// sentOpened has rule (database_not_ready, its condition holding) open an alert that a
// real SMTP server takes for to, checks that every header line of the message holds 1
// to 998 characters, as RFC 5322 2.1.1 wants (a server refuses a longer one, aiosmtpd
// with "500 Line too long", every attempt alike), and that its Subject reads back
// unfolded and decoded as written, and returns the message.
func sentOpened(t *testing.T, rule string, to []string) *mail.Message {
	t.Helper()
	s := startSMTP(t)
	f := newFixture(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.addr, Username: "alerts",
		Secrets: []string{smtpPassword}, From: "hookdedup <alerts@hotel.example>", To: to,
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
	data := msgs[0].Data
	head, _, _ := strings.Cut(data, "\r\n\r\n")
	for line := range strings.SplitSeq(head, "\r\n") {
		if len(line) > 998 || strings.TrimSpace(line) == "" {
			t.Errorf("header line of %d characters (blank: %v), want 1 to 998", len(line), strings.TrimSpace(line) == "")
		}
	}
	m, err := mail.ReadMessage(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if want := "hookdedup alert opened: " + rule; err != nil || subject != want {
		t.Errorf("Subject read back %q (%v), want %q", subject, err, want)
	}
	return m
}

// TestEmail_LongHeadersFolded: a rule named at length beyond ASCII (its Subject
// RFC 2047-encoded, three times as long) and a team of recipients with display names
// make Subject and To lines past the 998 characters a line of a message may hold. The
// headers are folded, and read back unfolded as written.
func TestEmail_LongHeadersFolded(t *testing.T) {
	var to []string
	for i := range 30 {
		to = append(to, fmt.Sprintf("Équipe de nuit %d <night%d@hotel.example>", i, i))
	}
	m := sentOpened(t, strings.TrimSpace(strings.Repeat("Réservations de l'hôtel non transmises ", 8)), to)
	got, err := m.Header.AddressList("To")
	if err != nil || len(got) != len(to) {
		t.Fatalf("To read back as %d addresses (%v), want %d", len(got), err, len(to))
	}
	for i, a := range got {
		if want := fmt.Sprintf("Équipe de nuit %d", i); a.Name != want || a.Address != fmt.Sprintf("night%d@hotel.example", i) {
			t.Errorf("To #%d read back %q <%s>, want %q <night%d@hotel.example>", i, a.Name, a.Address, want, i)
		}
	}
}

// TestEmail_LongWordInSubjectFolded: a rule named in plain ASCII without a blank, at
// length (a name made of words joined by dashes), gives a Subject that no blank can
// fold. It goes encoded (RFC 2047), in words that fold, and reads back as written.
func TestEmail_LongWordInSubjectFolded(t *testing.T) {
	sentOpened(t, strings.TrimSuffix(strings.Repeat("reservations-not-forwarded-to-the-pms-", 30), "-"), []string{"ops@hotel.example"})
}
