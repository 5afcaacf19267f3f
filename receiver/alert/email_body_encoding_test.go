package alert_test

import (
	"context"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage"
)

// TestEmail_BodyEncodedForAnyRelay: an email's body beyond ASCII (a rule and a summary
// in French) and with a line longer than the 998 characters a line of a message may
// hold (a rule named at length) goes out in ASCII lines of 76 characters at most, as
// quoted-printable, which any relay takes: sent as 8bit, one without 8BITMIME may refuse
// or mangle it, and a line too long is refused by every server (aiosmtpd: "500 Line too
// long") at every attempt. It reads back as the message's text, and its Subject as its
// title.
func TestEmail_BodyEncodedForAnyRelay(t *testing.T) {
	s := startSMTP(t)
	rule := strings.TrimSpace(strings.Repeat("Réservations non transmises ", 40))
	m := alert.Message{ID: "alert_notification_1_1", Event: storage.AlertOpened, At: time.Now(),
		Summary: "3 clés bloquées sur la source hôtel = ota", Value: "3",
		Alert: storage.Alert{ID: 1, Rule: rule, Kind: alert.KindStuckKeys, Subject: "ota", OpenedAt: time.Now()}}
	if err := s.channel(t, "mail").Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	msgs := s.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("server took %d messages, want 1", len(msgs))
	}
	data := msgs[0].Data
	for i := 0; i < len(data); i++ {
		if data[i] >= 0x80 {
			t.Fatalf("byte %#x at %d: the message is not ASCII", data[i], i)
		}
	}
	_, body, _ := strings.Cut(data, "\r\n\r\n")
	for line := range strings.SplitSeq(body, "\r\n") {
		if len(line) > 76 {
			t.Errorf("body line of %d characters, want 76 at most: %q", len(line), line)
		}
	}
	msg, err := mail.ReadMessage(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if cte := msg.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
		t.Fatalf("Content-Transfer-Encoding %q, want quoted-printable", cte)
	}
	if ct := msg.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	text, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if want := strings.ReplaceAll(m.Text(), "\n", "\r\n") + "\r\n"; err != nil || string(text) != want {
		t.Errorf("body read back %q (%v), want %q", text, err, want)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || subject != m.Title() {
		t.Errorf("Subject read back %q (%v), want %q", subject, err, m.Title())
	}
}
