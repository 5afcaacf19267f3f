package alert_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
)

// TestEmail_LineBreakInAddress: an address of from or to holding a line break is refused
// when the channel is built. net/mail reads one inside a comment as part of a valid
// address, and the To header is written as configured: the break would end the header
// and start another (a Bcc, a Content-Type) in every message sent.
func TestEmail_LineBreakInAddress(t *testing.T) {
	for _, tc := range []struct {
		setting  string
		from, to string
	}{
		{"to", "alerts@hotel.example", "ops@hotel.example (ops\r\nBcc: someone@elsewhere.example)"},
		{"to", "alerts@hotel.example", "ops@hotel.example (ops\nX-Injected: yes)"},
		{"from", "alerts@hotel.example (x\r\nBcc: someone@elsewhere.example)", "ops@hotel.example"},
	} {
		_, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: "127.0.0.1:587",
			From: tc.from, To: []string{tc.to}}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), tc.setting+":") || !strings.Contains(err.Error(), "line break") {
			t.Errorf("from %q, to %q: err = %v; want a refusal naming %s and the line break", tc.from, tc.to, err, tc.setting)
		}
	}
}

// TestWebhook_BadURLNotQuotedWhole: a webhook or slack URL that is refused is not
// quoted with the credentials, query or slack path it may hold, which the channel's
// target hides too, in whatever shape they come.
func TestWebhook_BadURLNotQuotedWhole(t *testing.T) {
	for _, raw := range []string{
		"ftp://alerts:TOPSECRET@hooks.example/alerts",
		"https://alerts:TOPSECRET@/alerts",
		"hooks.example/alerts?token=TOPSECRET",
		"https://hooks.example/alerts?token=TOPSECRET\x7f",
		"https:alerts:TOPSECRET@hooks.example/alerts",
		"alerts:TOPSECRET@hooks.example/alerts",
		"TOPSECRET@hooks.example/alerts",
		"hooks.slack.example/services/T0/B0/TOPSECRET",
		"https:hooks.slack.example/services/T0/B0/TOPSECRET",
	} {
		_, err := alert.NewChannel(alert.ChannelConfig{Name: "ops", Type: alert.TypeWebhook, URL: raw,
			Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "url:") || strings.Contains(err.Error(), "TOPSECRET") {
			t.Errorf("url %q: err = %v; want a refusal naming url, without the credential", raw, err)
		}
		_, err = alert.NewChannel(alert.ChannelConfig{Name: "ops", Type: alert.TypeSlack, URL: raw}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "url:") || strings.Contains(err.Error(), "TOPSECRET") {
			t.Errorf("slack url %q: err = %v; want a refusal naming url, without the credential", raw, err)
		}
	}
}

// TestWebhook_TargetMasksPathToken: a webhook channel's target, shown on the console's
// alerts page, masks a path segment that may be a token, as the console does a
// forward_url, and keeps an ordinary path.
func TestWebhook_TargetMasksPathToken(t *testing.T) {
	const token = "Kq7fZ2xR9mW4tY8uP3sL6vN1bC5hJ0gD-aE_iO2kQ7rT4yU9wX3zM8nB1cV6fG5hJ0lA"
	for _, tc := range []struct{ url, want string }{
		{"https://discord.com/api/webhooks/123456789012345678/" + token, "https://discord.com/api/webhooks/xxxxx/xxxxx"},
		{"https://ops.example/hooks/alerts?token=" + token, "https://ops.example/hooks/alerts"},
	} {
		c, err := alert.NewChannel(alert.ChannelConfig{Name: "ops", Type: alert.TypeWebhook, URL: tc.url,
			Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Target(); got != tc.want {
			t.Errorf("url %q: Target() = %q, want %q", tc.url, got, tc.want)
		}
	}
}

// TestNames_ControlCharacters: a rule's or a channel's name holding a comma or a
// control character is refused, naming the setting. A carriage return is a line break
// to some mail readers and refused by some SMTP servers; a NUL, which TOML's "\u0000"
// writes, PostgreSQL cannot store: a rule's name came back with U+FFFD, its alert
// resolved and opened again every clear_for, and a channel's failed every lease, so
// that no channel was told anything.
func TestNames_ControlCharacters(t *testing.T) {
	for _, name := range []string{"db\rdown", "db\ndown", "db\x00down", "db\tdown", "db\x7fdown", "db\u0085down", "db,down", "db\xffdown"} {
		err := alert.CheckRules([]alert.Rule{{Name: name, Kind: alert.KindDatabaseNotReady}}, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "name:") || strings.ContainsAny(err.Error(), "\x00\r\n") {
			t.Errorf("rule %q: err = %v, want a refusal naming name, in one line of printable text", name, err)
		}
		_, err = alert.NewChannel(alert.ChannelConfig{Name: name, Type: alert.TypeSlack, URL: "https://chat.example/hooks/x"}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "name:") {
			t.Errorf("channel %q: err = %v, want a refusal naming name", name, err)
		}
	}
	for _, name := range []string{"db-down", "db down", "base de données", "ops.chat_1"} {
		r := alert.Rule{Name: name, Kind: alert.KindDatabaseNotReady}.WithDefaults()
		if err := alert.CheckRules([]alert.Rule{r}, nil, nil); err != nil {
			t.Errorf("rule %q: %v, want it taken", name, err)
		}
		if _, err := alert.NewChannel(alert.ChannelConfig{Name: name, Type: alert.TypeSlack, URL: "https://chat.example/hooks/x"}, nil); err != nil {
			t.Errorf("channel %q: %v, want it taken", name, err)
		}
	}
}

// TestEmail_QuitFailsAfterAccepted: once the server has accepted the message (250
// after DATA), a failed QUIT is not a failed send: counted as one, the notification
// would be sent again, up to max_attempts mails for one alert.
func TestEmail_QuitFailsAfterAccepted(t *testing.T) {
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
	defer ln.Close()
	accepted := make(chan int, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		n := 0
		defer func() { accepted <- n }()
		var c net.Conn = conn
		r := bufio.NewReader(c)
		fmt.Fprint(c, "220 test ESMTP\r\n")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch cmd := strings.ToUpper(strings.TrimSpace(line)); {
			case strings.HasPrefix(cmd, "EHLO"):
				if _, ok := c.(*tls.Conn); ok {
					fmt.Fprint(c, "250 test\r\n")
				} else {
					fmt.Fprint(c, "250-test\r\n250 STARTTLS\r\n")
				}
			case cmd == "STARTTLS":
				fmt.Fprint(c, "220 go ahead\r\n")
				tc := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{cert}})
				if err := tc.Handshake(); err != nil {
					return
				}
				c, r = tc, bufio.NewReader(tc)
			case cmd == "DATA":
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
				n++
				fmt.Fprint(c, "250 queued\r\n")
			case cmd == "QUIT":
				fmt.Fprint(c, "554 something went wrong\r\n")
				return
			default:
				fmt.Fprint(c, "250 ok\r\n")
			}
		}
	}()
	ch, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: ln.Addr().String(),
		From: "alerts@hotel.example", To: []string{"ops@hotel.example"}, CAFile: certFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = ch.Send(context.Background(), alert.Message{ID: "x", Event: "opened", At: time.Now()})
	if n := <-accepted; n != 1 {
		t.Fatalf("server accepted %d messages, want 1 (Send: %v)", n, err)
	}
	if err != nil {
		t.Fatalf("Send = %v after the server accepted the message; want nil", err)
	}
}

// TestChannel_PortThatCannotBeDialled: an smtp_addr or a webhook url whose port no
// connection can be made to (a word that names no service, 0, past 65535) is refused
// when the channel is built, naming the setting: it used to be taken, and the first
// alert, at the worst moment, failed every attempt on "unknown port".
func TestChannel_PortThatCannotBeDialled(t *testing.T) {
	for _, addr := range []string{"smtp.example.com:smtp-tls", "smtp.example.com:0", "smtp.example.com:99999", "smtp.example.com:-1"} {
		_, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: addr,
			From: "alerts@hotel.example", To: []string{"ops@hotel.example"}}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "smtp_addr:") || !strings.Contains(err.Error(), "port") {
			t.Errorf("smtp_addr %q: err = %v; want a refusal naming smtp_addr and its port", addr, err)
		}
	}
	for _, raw := range []string{"https://hooks.example:0/alerts", "https://hooks.example:99999/alerts"} {
		_, err := alert.NewChannel(alert.ChannelConfig{Name: "ops", Type: alert.TypeWebhook, URL: raw,
			Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "url:") || !strings.Contains(err.Error(), "port") {
			t.Errorf("url %q: err = %v; want a refusal naming url and its port", raw, err)
		}
	}
	for _, addr := range []string{"smtp.example.com:587", "smtp.example.com:smtp", "[::1]:25"} {
		if _, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: addr,
			From: "alerts@hotel.example", To: []string{"ops@hotel.example"}}, nil); err != nil {
			t.Errorf("smtp_addr %q: %v; want it taken", addr, err)
		}
	}
}

// TestEmail_ImplicitTLSPortRefused: port 465 (submissions) speaks TLS from the first
// byte and never greets in clear; the channel speaks STARTTLS, so every attempt waited
// out its timeout for a greeting and failed on "i/o timeout", which says nothing of the
// port. It is refused when the channel is built, pointing to the STARTTLS port.
func TestEmail_ImplicitTLSPortRefused(t *testing.T) {
	for _, addr := range []string{"smtp.example.com:465", "smtp.example.com:submissions"} {
		_, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: addr,
			From: "alerts@hotel.example", To: []string{"ops@hotel.example"}}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "smtp_addr:") || !strings.Contains(err.Error(), "587") {
			t.Errorf("smtp_addr %q: err = %v; want a refusal naming smtp_addr and the STARTTLS port, 587", addr, err)
		}
	}
}

// TestEmail_SMTPAddrWithCredentialsNotQuoted: an operator used to SMTP URLs writes the
// user and password into smtp_addr. It is refused, naming smtp_addr and where the user
// and password go, without quoting the password (the error goes to stderr and the
// journal); and one whose host holds a user part ("secret@host:587", which splits
// as host:port) is refused too, not taken and looked up in DNS at every attempt.
func TestEmail_SMTPAddrWithCredentialsNotQuoted(t *testing.T) {
	for _, addr := range []string{
		"smtp://alerts:TOPSECRET@smtp.example.com:587",
		"smtps://alerts:TOPSECRET@smtp.example.com",
		"alerts:TOPSECRET@smtp.example.com:587",
		"TOPSECRET@smtp.example.com:587",
		"alerts@hotel.example:TOPSECRET@smtp.example.com:587",
	} {
		_, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: addr,
			From: "alerts@hotel.example", To: []string{"ops@hotel.example"}}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "smtp_addr:") || strings.Contains(err.Error(), "TOPSECRET") ||
			!strings.Contains(err.Error(), "username") {
			t.Errorf("smtp_addr %q: err = %v; want a refusal naming smtp_addr and username, without the password", addr, err)
		}
	}
}
