package alert_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage/storagetest"
)

// smtpPassword is the test server's password: it must reach the server (AUTH) and
// nothing else (logs, errors).
const smtpPassword = "s3cret-smtp-Pa55word"

// smtpServer is a real SMTP server (aiosmtpd) requiring STARTTLS and AUTH.
type smtpServer struct {
	addr   string
	caFile string // its self-signed certificate, for the channel to trust
	outDir string
}

// smtpMessage is one message the server took.
type smtpMessage struct {
	MailFrom      string   `json:"mail_from"`
	RcptTos       []string `json:"rcpt_tos"`
	Data          string   `json:"data"`
	TLS           bool     `json:"tls"`
	Authenticated bool     `json:"authenticated"`
}

// aiosmtpdPython returns a Python that can import aiosmtpd: Debian's, which
// python3-aiosmtpd installs into, before whatever python3 the PATH finds first.
func aiosmtpdPython() (string, error) {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if err := exec.Command(py, "-c", "import aiosmtpd.controller").Run(); err == nil {
			return py, nil
		}
	}
	return "", errors.New("no python3 with aiosmtpd (apt-get install python3-aiosmtpd, as `make deps` does)")
}

// startSMTP starts the server on a free port of 127.0.0.1, or skips the test when
// aiosmtpd is missing, except in CI (CI=true), where that fails it.
func startSMTP(t *testing.T) *smtpServer {
	t.Helper()
	py, err := aiosmtpdPython()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	s := &smtpServer{caFile: filepath.Join(dir, "cert.pem"), outDir: filepath.Join(dir, "out")}
	keyFile := filepath.Join(dir, "key.pem")
	writeSelfSigned(t, s.caFile, keyFile)
	if err := os.Mkdir(s.outDir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(s.addr)

	cmd := exec.Command(py, filepath.Join("testdata", "smtpd.py"), port, s.caFile, keyFile, "alerts", smtpPassword, s.outDir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the script stops when its input closes
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("printed %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("smtpd.py did not start: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("smtpd.py not ready within a minute\n%s", stderr.String())
	}
	return s
}

// messages returns the messages the server took, in order.
func (s *smtpServer) messages(t *testing.T) []smtpMessage {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(s.outDir, "msg-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []smtpMessage
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		var m smtpMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func (s *smtpServer) channel(t *testing.T, name string) *alert.Channel {
	t.Helper()
	c, err := alert.NewChannel(alert.ChannelConfig{Name: name, Type: alert.TypeEmail, SMTPAddr: s.addr, Username: "alerts",
		Secrets: []string{smtpPassword}, From: "hookdedup <alerts@hotel.example>", To: []string{"ops@hotel.example"},
		CAFile: s.caFile, Timeout: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeSelfSigned writes a certificate for 127.0.0.1 and its key, as PEM.
func writeSelfSigned(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestEmail_STARTTLSAndAuth sends an alert through a real SMTP server that requires
// STARTTLS and AUTH, and reads what it received.
func TestEmail_STARTTLSAndAuth(t *testing.T) {
	s := startSMTP(t)
	f := newFixture(t)
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}},
		[]*alert.Channel{s.channel(t, "mail")},
		func(c *alert.Config) {
			c.Ready = func(context.Context) error { return errors.New("database is locked") }
		})
	f.evaluate(t, e)
	msgs := s.messages(t)
	if len(msgs) != 1 {
		t.Fatalf("server took %d messages, want 1; log:\n%s", len(msgs), f.logs.String())
	}
	m := msgs[0]
	if !m.TLS || !m.Authenticated || m.MailFrom != "alerts@hotel.example" || strings.Join(m.RcptTos, ",") != "ops@hotel.example" {
		t.Errorf("message = %+v", m)
	}
	for _, want := range []string{"Subject: hookdedup alert opened: db", "database is locked", "To: ops@hotel.example"} {
		if !strings.Contains(m.Data, want) {
			t.Errorf("message lacks %q:\n%s", want, m.Data)
		}
	}
}

// TestEmail_WrongPassword: a refused AUTH is an error that is retried, and neither it
// nor the log holds the password.
func TestEmail_WrongPassword(t *testing.T) {
	s := startSMTP(t)
	f := newFixture(t)
	const wrong = "not-the-Pa55word-at-all"
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: s.addr, Username: "alerts",
		Secrets: []string{wrong}, From: "alerts@hotel.example", To: []string{"ops@hotel.example"}, CAFile: s.caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := f.engine(t, []alert.Rule{{Name: "db", Kind: alert.KindDatabaseNotReady, Channels: []string{"mail"}}}, []*alert.Channel{c},
		func(c *alert.Config) { c.Ready = func(context.Context) error { return errors.New("down") } })
	f.evaluate(t, e)
	if n := len(s.messages(t)); n != 0 {
		t.Fatalf("server took %d messages with a wrong password", n)
	}
	a := f.alerts(t)[0]
	if a.PendingNotifications != 1 || !strings.Contains(a.LastNotificationError, "AUTH") {
		t.Errorf("alert = %+v, want a pending notification that failed at AUTH", a)
	}
	for _, secret := range []string{wrong, smtpPassword} {
		if strings.Contains(f.logs.String(), secret) || strings.Contains(a.LastNotificationError, secret) {
			t.Errorf("a password is in the log or the error:\n%s", f.logs.String())
		}
	}
}

// TestEmail_NoSTARTTLS: a server that does not offer STARTTLS is told nothing.
func TestEmail_NoSTARTTLS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		fmt.Fprint(conn, "220 plain ESMTP\r\n")
		var all strings.Builder
		for {
			line, err := r.ReadString('\n')
			all.WriteString(line)
			if err != nil {
				break
			}
			switch {
			case strings.HasPrefix(line, "EHLO"):
				fmt.Fprint(conn, "250-plain\r\n250 AUTH PLAIN\r\n")
			case strings.HasPrefix(line, "QUIT"):
				fmt.Fprint(conn, "221 bye\r\n")
				got <- all.String()
				return
			default:
				fmt.Fprint(conn, "250 ok\r\n")
			}
		}
		got <- all.String()
	}()
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "mail", Type: alert.TypeEmail, SMTPAddr: ln.Addr().String(), Username: "alerts",
		Secrets: []string{smtpPassword}, From: "alerts@hotel.example", To: []string{"ops@hotel.example"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Send(context.Background(), alert.Message{ID: "x", Event: "opened"})
	if err == nil || !strings.Contains(err.Error(), "does not offer STARTTLS") {
		t.Fatalf("Send = %v, want a refusal to send in clear", err)
	}
	storagetest.Eventually(t, 10*time.Second, func() error {
		select {
		case s := <-got:
			if strings.Contains(s, "AUTH") || strings.Contains(s, "MAIL") {
				return fmt.Errorf("client sent in clear:\n%s", s)
			}
			return nil
		default:
			return errors.New("server still waiting")
		}
	})
}
