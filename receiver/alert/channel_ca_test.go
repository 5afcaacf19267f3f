package alert_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage"
)

// privateReceiver is an HTTPS endpoint under a certificate no system trusts, as an
// internal webhook receiver or a self-hosted Mattermost is under a private CA. It keeps
// the bodies that reach its handler, and every byte it read off the wire before TLS, to
// tell whether anything crossed the network in clear.
type privateReceiver struct {
	srv    *httptest.Server
	caFile string // the PEM of its certificate, which signs itself: the CA to trust

	mu     sync.Mutex
	bodies []string
	wire   bytes.Buffer
}

func newPrivateReceiver(t *testing.T) *privateReceiver {
	t.Helper()
	dir := t.TempDir()
	r := &privateReceiver{caFile: filepath.Join(dir, "ca.pem")}
	keyFile := filepath.Join(dir, "key.pem")
	writeSelfSigned(t, r.caFile, keyFile)
	cert, err := tls.LoadX509KeyPair(r.caFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.bodies = append(r.bodies, string(body))
	}))
	r.srv.Listener = &wireListener{Listener: r.srv.Listener, r: r}
	r.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	// A refused handshake is what some of these tests expect: not worth a line on stderr.
	r.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	return r
}

func (r *privateReceiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

func (r *privateReceiver) wireBytes() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wire.String()
}

// wireListener hands the server connections that copy what they read into r.wire.
type wireListener struct {
	net.Listener
	r *privateReceiver
}

func (l *wireListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: c, r: l.r}, nil
}

type wireConn struct {
	net.Conn
	r *privateReceiver
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.r.mu.Lock()
	c.r.wire.Write(p[:n])
	c.r.mu.Unlock()
	return n, err
}

// caChannel is a channel of type typ named "ops" that posts to the receiver, trusting
// caFile ("": the system's CAs).
func caChannel(t *testing.T, typ, url, caFile string) (*alert.Channel, error) {
	t.Helper()
	cfg := alert.ChannelConfig{Name: "ops", Type: typ, URL: url, CAFile: caFile}
	if typ == alert.TypeWebhook {
		cfg.Secrets = []string{hookSecret}
	}
	return alert.NewChannel(cfg, nil)
}

// caTestMessage is the test alert the channels send: its rule's name is what to look for
// on the wire.
var caTestMessage = alert.Message{ID: "alert_notification_1_1", Event: storage.AlertOpened, At: time.Now(),
	Summary: "downstream pms failed 5 times", Alert: storage.Alert{ID: 1, Rule: "pms-down-canary", Kind: "downstream_failing"}}

// The paths the receivers are posted at; a slack one holds its credential, as Slack's
// and Mattermost's do.
var caPaths = map[string]string{alert.TypeWebhook: "/alerts", alert.TypeSlack: "/hooks/T0/B0/XXXXsecretXXXX"}

// TestChannel_CAFileTrustsPrivateCA: a webhook or slack channel whose ca_file holds the
// CA of an endpoint under a private CA (an internal receiver, a self-hosted Mattermost)
// delivers to it, over TLS. Only email channels took ca_file, and the others trusted the
// system's CAs alone, so such an endpoint could not be used at all.
func TestChannel_CAFileTrustsPrivateCA(t *testing.T) {
	for _, typ := range []string{alert.TypeWebhook, alert.TypeSlack} {
		t.Run(typ, func(t *testing.T) {
			r := newPrivateReceiver(t)
			c, err := caChannel(t, typ, r.srv.URL+caPaths[typ], r.caFile)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Send(context.Background(), caTestMessage); err != nil {
				t.Fatalf("Send = %v; want the test alert delivered", err)
			}
			got := r.received()
			if len(got) != 1 || !strings.Contains(got[0], "pms-down-canary") {
				t.Fatalf("receiver got %q; want the one test alert", got)
			}
			if strings.Contains(r.wireBytes(), "pms-down-canary") {
				t.Error("the test alert crossed the network in clear")
			}
		})
	}
}

// TestChannel_UntrustedCertificateNotSent: a webhook or slack channel whose endpoint's
// certificate is not trusted (no ca_file, or one of another CA) sends nothing, in clear
// or otherwise, and its error says the certificate is not trusted, naming the channel and
// what to set: the bare x509 error names neither.
func TestChannel_UntrustedCertificateNotSent(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other-ca.pem")
	writeSelfSigned(t, other, filepath.Join(filepath.Dir(other), "other-key.pem"))
	for _, typ := range []string{alert.TypeWebhook, alert.TypeSlack} {
		for _, tc := range []struct {
			name, caFile string
			want         []string
		}{
			{"NoCAFile", "", []string{"not trusted", `channel "ops"`, "ca_file"}},
			{"OtherCA", other, []string{"not trusted", `channel "ops"`, "ca_file", other}},
		} {
			t.Run(typ+"/"+tc.name, func(t *testing.T) {
				r := newPrivateReceiver(t)
				c, err := caChannel(t, typ, r.srv.URL+caPaths[typ], tc.caFile)
				if err != nil {
					t.Fatal(err)
				}
				err = c.Send(context.Background(), caTestMessage)
				if err == nil {
					t.Fatal("Send = nil; want the untrusted certificate refused")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Send = %q; want it to say %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "XXXXsecretXXXX") {
					t.Errorf("Send = %q quotes the slack URL's credential", err)
				}
				if got := r.received(); len(got) != 0 {
					t.Errorf("receiver got %q; want nothing", got)
				}
				if wire := r.wireBytes(); strings.Contains(wire, "POST") || strings.Contains(wire, "pms-down-canary") {
					t.Errorf("the request crossed the network in clear: %q", wire)
				}
			})
		}
	}
}

// TestChannel_CAFileRefused: a webhook or slack channel's ca_file that cannot be read,
// or holds no PEM certificate, is refused when the channel is built, naming the setting
// and the file, rather than fail every send; and one on an http:// url, which has no TLS
// for it to act on, is refused as having no effect, without quoting the url.
func TestChannel_CAFileRefused(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeSelfSigned(t, ca, filepath.Join(dir, "key.pem"))
	notPEM := filepath.Join(dir, "not-pem.crt")
	if err := os.WriteFile(notPEM, []byte("MIIB...: a certificate pasted without its PEM lines\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyOnly := filepath.Join(dir, "key.pem")
	missing := filepath.Join(dir, "missing.pem")
	for _, typ := range []string{alert.TypeWebhook, alert.TypeSlack} {
		for _, tc := range []struct {
			name, url, caFile string
			want              []string
		}{
			{"Missing", "https://hooks.example/hooks/T0/B0/TOPSECRET", missing, []string{"ca_file:", missing}},
			{"NotPEM", "https://hooks.example/hooks/T0/B0/TOPSECRET", notPEM, []string{"ca_file:", notPEM, "no PEM certificate"}},
			{"KeyOnly", "https://hooks.example/hooks/T0/B0/TOPSECRET", keyOnly, []string{"ca_file:", keyOnly, "no PEM certificate"}},
			{"PlainHTTP", "http://hooks.example/hooks/T0/B0/TOPSECRET", ca, []string{"ca_file:", "http://", "no effect"}},
		} {
			t.Run(typ+"/"+tc.name, func(t *testing.T) {
				_, err := caChannel(t, typ, tc.url, tc.caFile)
				if err == nil {
					t.Fatal("NewChannel = nil; want ca_file refused")
				}
				if !strings.HasPrefix(err.Error(), "ca_file:") || strings.Contains(err.Error(), "TOPSECRET") {
					t.Errorf("NewChannel = %q; want a refusal naming ca_file first, without the url's credential", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("NewChannel = %q; want it to say %q", err, w)
					}
				}
			})
		}
	}
}

// TestEmail_UntrustedCertificateNamesChannel: an email channel whose server's
// certificate is not trusted says so as the others do, naming the channel and ca_file,
// and sends nothing.
func TestEmail_UntrustedCertificateNamesChannel(t *testing.T) {
	s := startSMTP(t)
	c, err := alert.NewChannel(alert.ChannelConfig{Name: "ops", Type: alert.TypeEmail, SMTPAddr: s.addr, Username: "alerts",
		Secrets: []string{smtpPassword}, From: "alerts@hotel.example", To: []string{"ops@hotel.example"}, Timeout: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Send(context.Background(), caTestMessage)
	for _, w := range []string{"STARTTLS", "not trusted", `channel "ops"`, "ca_file"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Send = %v; want it to say %q", err, w)
		}
	}
	if msgs := s.messages(t); len(msgs) != 0 {
		t.Errorf("server took %d messages, want none", len(msgs))
	}
}
