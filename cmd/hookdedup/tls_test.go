package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const testDomain = "hooks.example.test"

// testCA issues certificates for the tests' own servers.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hookdedup test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

var testSerial atomic.Int64

// issue returns a PEM certificate for names (and 127.0.0.1) and its PEM key.
// files writes a certificate for names, issued by ca, and its key into dir, and
// returns their paths.
func (ca *testCA) files(t *testing.T, dir string, names ...string) (certPath, keyPath string) {
	c, k := ca.issue(t, names...)
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	replaceFile(t, certPath, c)
	replaceFile(t, keyPath, k)
	return certPath, keyPath
}

func (ca *testCA) issue(t *testing.T, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(100 + testSerial.Add(1)),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// replaceFile writes data beside path and renames it over path, as certificate tools do.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// testLog returns a logger whose output the test can read, shown when the test fails.
func testLog(t *testing.T) (*slog.Logger, *lockedBuffer) {
	var buf lockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hookdedup log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// serveTLS serves h over HTTPS with cfg on ln, as serve does.
func serveTLS(t *testing.T, ln net.Listener, cfg *tls.Config, h http.Handler) {
	t.Helper()
	// Refused handshakes (a name outside acme_domains) are expected: not on stderr.
	srv := &http.Server{Handler: h, TLSConfig: cfg, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
}

// serveHTTP serves h over plain HTTP on ln.
func serveHTTP(t *testing.T, ln net.Listener, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func portOf(t *testing.T, addr net.Addr) int {
	t.Helper()
	return addr.(*net.TCPAddr).Port
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// handshake connects to addr as a client of serverName that trusts roots, and returns
// the connection's leaf certificate. The handshake verifies the chain.
func handshake(t *testing.T, addr, serverName string, roots *x509.CertPool, timeout time.Duration) (*x509.Certificate, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := &tls.Dialer{Config: &tls.Config{ServerName: serverName, RootCAs: roots}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// getOn sends one GET / on an open HTTP/1.1 connection and checks the answer.
func getOn(t *testing.T, c *tls.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+testDomain+"\r\n\r\n"); err != nil {
		t.Fatalf("request on the open connection: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("answer on the open connection: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("answer on the open connection: %d %q", resp.StatusCode, body)
	}
}

func TestTLS_Files(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePair := func(names ...string) *x509.Certificate {
		c, k := ca.issue(t, names...)
		replaceFile(t, keyPath, k)
		replaceFile(t, certPath, c)
		b, _ := pem.Decode(c)
		leaf, _ := x509.ParseCertificate(b.Bytes)
		return leaf
	}
	first := writePair(testDomain)
	logger, logs := testLog(t)
	setup, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: "127.0.0.1:0", poll: 10 * time.Millisecond}, logger)
	if err != nil {
		t.Fatal(err)
	}
	if setup.Config.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x, want TLS 1.2", setup.Config.MinVersion)
	}
	ln := listen(t)
	serveTLS(t, ln, setup.Config, okHandler)
	addr := ln.Addr().String()

	// A connection opened on the first certificate, kept open through the reloads.
	d := &tls.Dialer{Config: &tls.Config{ServerName: testDomain, RootCAs: ca.pool}}
	nc, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	open := nc.(*tls.Conn)
	br := bufio.NewReader(open)
	getOn(t, open, br)
	if got := open.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("first handshake: serial %v, want %v", got, first.SerialNumber)
	}

	t.Run("Reload", func(t *testing.T) {
		second := writePair(testDomain)
		if err := setup.Reload(); err != nil {
			t.Fatal(err)
		}
		leaf, err := handshake(t, addr, testDomain, ca.pool, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if leaf.SerialNumber.Cmp(second.SerialNumber) != 0 {
			t.Fatalf("after Reload: serial %v, want the new %v", leaf.SerialNumber, second.SerialNumber)
		}
		getOn(t, open, br) // the open connection is still served
	})

	t.Run("FailedReloadKeepsThePair", func(t *testing.T) {
		before, err := handshake(t, addr, testDomain, ca.pool, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// A certificate whose key is not the one in the key file.
		other, _ := ca.issue(t, testDomain)
		replaceFile(t, certPath, other)
		err = setup.Reload()
		if err == nil || !strings.Contains(err.Error(), keyPath) || !strings.Contains(err.Error(), certPath) {
			t.Fatalf("Reload of a mismatched pair: %v, want an error naming %s and %s", err, keyPath, certPath)
		}
		if !strings.Contains(logs.String(), "still serving the previous certificate") {
			t.Errorf("a failed reload is not logged:\n%s", logs.String())
		}
		after, err := handshake(t, addr, testDomain, ca.pool, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if after.SerialNumber.Cmp(before.SerialNumber) != 0 {
			t.Fatalf("after a failed reload: serial %v, want the previous %v", after.SerialNumber, before.SerialNumber)
		}
	})

	t.Run("Poll", func(t *testing.T) {
		runTLS(t, setup)
		third := writePair(testDomain, "other.example.test")
		var leaf *x509.Certificate
		for i := 0; i < 1000; i++ { // at most ~10 s
			if leaf, err = handshake(t, addr, testDomain, ca.pool, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if leaf.SerialNumber.Cmp(third.SerialNumber) == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if leaf.SerialNumber.Cmp(third.SerialNumber) != 0 {
			t.Fatalf("the changed files were not picked up: serial %v, want %v", leaf.SerialNumber, third.SerialNumber)
		}
		getOn(t, open, br)
		if got := open.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(first.SerialNumber) != 0 {
			t.Errorf("the open connection's certificate changed: %v", got)
		}
	})
}

func TestTLS_FilesAtStart(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certPEM, keyPEM := ca.issue(t, testDomain)
	otherCert, _ := ca.issue(t, testDomain)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key := write("cert.pem", certPEM), write("key.pem", keyPEM)
	other := write("other.pem", otherCert)
	empty := write("empty.pem", nil)
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name, cert, key string
		want            []string // substrings of the error
	}{
		{"MissingCert", missing, key, []string{"tls_cert_file", missing}},
		{"MissingKey", cert, missing, []string{"tls_key_file", missing}},
		{"CertIsADirectory", dir, key, []string{"tls_cert_file", dir}},
		{"NoCertificateInIt", empty, key, []string{"tls_cert_file " + empty, "no PEM certificate"}},
		{"KeyFileHoldsACertificate", cert, other, []string{"tls_key_file " + other, "no PEM private key"}},
		{"Mismatched", other, key, []string{"tls_key_file " + key, "tls_cert_file " + other, "does not go with"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newTLS(tlsSettings{CertFile: tc.cert, KeyFile: tc.key}, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("newTLS accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestTLSSettings_Validate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    tlsSettings
		want string // "" is valid
	}{
		{"Files", tlsSettings{CertFile: "c", KeyFile: "k"}, ""},
		{"ACME", tlsSettings{ACMEDomains: []string{"hooks.example.com", "Hooks.Example.com."}, ACMEEmail: "ops@example.com"}, ""},
		{"ACMEIDN", tlsSettings{ACMEDomains: []string{"bücher.example"}}, ""},
		{"ACMEDirectory", tlsSettings{ACMEDomains: []string{"a.example"}, ACMEDirectory: "https://acme.example/dir"}, ""},
		{"CertWithoutKey", tlsSettings{CertFile: "c"}, "tls_cert_file is set but tls_key_file is not"},
		{"KeyWithoutCert", tlsSettings{KeyFile: "k"}, "tls_key_file is set but tls_cert_file is not"},
		{"FilesAndACME", tlsSettings{CertFile: "c", KeyFile: "k", ACMEDomains: []string{"a.example"}}, "choose certificate files or ACME"},
		{"EmailWithoutDomains", tlsSettings{ACMEEmail: "ops@example.com"}, "acme_email is set but acme_domains is empty"},
		{"DirectoryWithoutDomains", tlsSettings{ACMEDirectory: "https://a.example/dir"}, "acme_directory is set but acme_domains is empty"},
		{"EmptyDomain", tlsSettings{ACMEDomains: []string{""}}, `acme_domains: "" is empty`},
		{"Wildcard", tlsSettings{ACMEDomains: []string{"*.example.com"}}, "DNS-01"},
		{"IP", tlsSettings{ACMEDomains: []string{"192.0.2.1"}}, "IP address"},
		{"URL", tlsSettings{ACMEDomains: []string{"https://hooks.example.com"}}, "without scheme, port or path"},
		{"Port", tlsSettings{ACMEDomains: []string{"hooks.example.com:443"}}, "without scheme, port or path"},
		{"SingleLabel", tlsSettings{ACMEDomains: []string{"localhost"}}, "not a fully qualified name"},
		{"Underscore", tlsSettings{ACMEDomains: []string{"hooks_1.example.com"}}, "not a valid host name"},
		{"Hyphen", tlsSettings{ACMEDomains: []string{"-hooks.example.com"}}, "not a valid host name"},
		{"Space", tlsSettings{ACMEDomains: []string{"hooks example.com"}}, "not a valid host name"},
		{"LongLabel", tlsSettings{ACMEDomains: []string{strings.Repeat("a", 64) + ".example.com"}}, "not a valid host name"},
		{"BadEmail", tlsSettings{ACMEDomains: []string{"a.example"}, ACMEEmail: "Ops <ops@example.com>"}, "acme_email"},
		{"MailtoEmail", tlsSettings{ACMEDomains: []string{"a.example"}, ACMEEmail: "mailto:ops@example.com"}, "acme_email"},
		{"PlainHTTPDirectory", tlsSettings{ACMEDomains: []string{"a.example"}, ACMEDirectory: "http://acme.example/dir"}, "not an https:// URL"},
		{"BadHTTPAddr", tlsSettings{CertFile: "c", KeyFile: "k", HTTPAddr: "80"}, "http_addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want an error saying %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	got, err := acmeDomains([]string{"Hooks.Example.com.", "hooks.example.com", "bücher.example"})
	if err != nil || strings.Join(got, ",") != "hooks.example.com,xn--bcher-kva.example" {
		t.Errorf("acmeDomains = %q, %v; want lower case, ASCII, no repeats", got, err)
	}
	if d := acmeCacheDir("/var/lib/hookdedup/hookdedup.db"); d != "/var/lib/hookdedup/acme" {
		t.Errorf("acmeCacheDir of a SQLite file = %q", d)
	}
	if d := acmeCacheDir("postgres://db.example/hookdedup"); d != "acme" {
		t.Errorf("acmeCacheDir of a database server = %q", d)
	}
}

func TestTLS_PlainHTTP(t *testing.T) {
	certPath, keyPath := newTestCA(t).files(t, t.TempDir(), testDomain)
	for _, tc := range []struct {
		name, addr, method, host, target string
		status                           int
		location, errorSays              string
	}{
		{"Console", ":443", "GET", testDomain, "/events?source=ota", 302, "https://" + testDomain + "/events?source=ota", ""},
		{"HostPortDropped", ":443", "HEAD", testDomain + ":80", "/", 302, "https://" + testDomain + "/", ""},
		{"OtherHTTPSPort", "0.0.0.0:8443", "GET", testDomain, "/login", 302, "https://" + testDomain + ":8443/login", ""},
		{"IP", ":443", "GET", "127.0.0.1:80", "/", 302, "https://127.0.0.1/", ""},
		{"IPOtherPort", ":8443", "GET", "127.0.0.1", "/", 302, "https://127.0.0.1:8443/", ""},
		{"IPv6NotCertified", ":443", "GET", "[2001:db8::1]:80", "/", 400, "", "names another host"},
		{"OtherHost", ":443", "GET", "evil.example", "/login", 400, "", "names another host"},
		{"OtherHostLookingAlike", ":443", "GET", "evil." + testDomain + ".example", "/", 400, "", "names another host"},
		{"Webhook", ":443", "POST", testDomain, "/webhooks/ota", 400, "", "send the request to https://" + testDomain + "/webhooks/ota"},
		{"ConsoleForm", ":443", "POST", testDomain, "/login", 400, "", "serves only HTTPS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: tc.addr}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(tc.method, "http://"+tc.host+tc.target, strings.NewReader(`{"event_id":"1"}`))
			r.Host = tc.host
			w := httptest.NewRecorder()
			setup.HTTPHandler.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("%s %s: %d, want %d", tc.method, tc.target, w.Code, tc.status)
			}
			if loc := w.Header().Get("Location"); loc != tc.location {
				t.Errorf("Location = %q, want %q", loc, tc.location)
			}
			if tc.errorSays != "" {
				var body struct{ Error string }
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || !strings.Contains(body.Error, tc.errorSays) {
					t.Errorf("body %q (%v): want JSON whose error says %q", w.Body.String(), err, tc.errorSays)
				}
				if ct := w.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q", ct)
				}
			}
		})
	}
}

func TestTLS_ACMECacheModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "acme")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, "acme_account+key")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newTLS(tlsSettings{ACMEDomains: []string{testDomain}, CacheDir: dir}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, dir)
}

// checkPrivate fails unless dir is 0700 and every file in it 0600.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o700 {
		t.Errorf("%s has mode %o, want 0700", dir, info.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %o, want 0600", e.Name(), info.Mode().Perm())
		}
	}
}

// ---- ACME against Pebble, Let's Encrypt's test CA ----

// pebble is a running Pebble, the ACME server, on 127.0.0.1.
type pebble struct {
	dirURL, mgmtURL string
	client          *http.Client // trusts Pebble's own HTTPS certificate
	// caFile holds, in PEM, the CA of Pebble's own HTTPS certificate: a process
	// trusts it with SSL_CERT_FILE.
	caFile string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *lockedBuffer
}

// pebbleBinary finds Debian's pebble; without it the ACME tests fail, except under
// -short, where they are skipped (make test installs it).
func pebbleBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("pebble")
	if err != nil {
		if testing.Short() {
			t.Skip("pebble (Let's Encrypt's test ACME server) is not installed: apt-get install pebble, or run make deps")
		}
		t.Fatal("pebble (Let's Encrypt's test ACME server) is not installed: apt-get install pebble, or run make deps")
	}
	return p
}

// startDNS serves DNS on 127.0.0.1 over UDP, answering every A query with 127.0.0.1 and
// every other query with no record, so that Pebble's validation of any name reaches the
// test's listeners.
func startDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return // closed
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET},
					dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
			}
			msg, err := b.Finish()
			if err != nil {
				continue
			}
			pc.WriteTo(msg, from)
		}
	}()
	return pc.LocalAddr().String()
}

// refusingPort is a port on 127.0.0.1 that accepts connections and closes them at once:
// a challenge sent there fails, so a test decides which challenge can succeed.
func refusingPort(t *testing.T) int {
	t.Helper()
	ln := listen(t)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return portOf(t, ln.Addr())
}

func freePort(t *testing.T) int {
	t.Helper()
	ln := listen(t)
	defer ln.Close()
	return portOf(t, ln.Addr())
}

// startPebble runs Pebble with validation sent to httpPort and tlsPort on 127.0.0.1 (by
// way of the DNS server dns), and waits until its directory answers.
func startPebble(t *testing.T, httpPort, tlsPort int, dns string) *pebble {
	t.Helper()
	return startPebbleValidity(t, httpPort, tlsPort, dns, 0)
}

// startPebbleValidity is startPebble with the certificates valid for validity (whole
// seconds), so that renewal and expiry come within a test; 0 is Pebble's default.
func startPebbleValidity(t *testing.T, httpPort, tlsPort int, dns string, validity time.Duration) *pebble {
	t.Helper()
	bin := pebbleBinary(t)
	dir := t.TempDir()
	ca := newTestCA(t)
	certPEM, keyPEM := ca.issue(t, "localhost")
	certPath, keyPath := filepath.Join(dir, "pebble-cert.pem"), filepath.Join(dir, "pebble-key.pem")
	replaceFile(t, certPath, certPEM)
	replaceFile(t, keyPath, keyPEM)
	caFile := filepath.Join(dir, "pebble-ca.pem")
	replaceFile(t, caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}},
		Timeout:   30 * time.Second,
	}
	// Pebble's own ports are picked free and handed over, so another process may take
	// one first: then Pebble exits and another pair is tried.
	for attempt := 1; ; attempt++ {
		listenAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		mgmtAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		settings := map[string]any{
			"listenAddress":                  listenAddr,
			"managementListenAddress":        mgmtAddr,
			"certificate":                    certPath,
			"privateKey":                     keyPath,
			"httpPort":                       httpPort,
			"tlsPort":                        tlsPort,
			"ocspResponderURL":               "",
			"externalAccountBindingRequired": false,
		}
		if validity > 0 {
			settings["certificateValidityPeriod"] = int(validity.Seconds())
		}
		cfg, _ := json.Marshal(map[string]any{"pebble": settings})
		cfgPath := filepath.Join(dir, "pebble-config.json")
		if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		p := &pebble{
			dirURL:  "https://" + listenAddr + "/dir",
			mgmtURL: "https://" + mgmtAddr,
			client:  client,
			caFile:  caFile,
			exited:  make(chan struct{}),
			out:     &lockedBuffer{},
		}
		p.cmd = exec.Command(bin, "-config", cfgPath, "-dnsserver", dns)
		// No sleeping before validation, and no nonces refused at random: the tests are
		// about hookdedup, not about the ACME client's retries. Validation itself is real.
		p.cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start pebble: %v", err)
		}
		go func() { p.cmd.Wait(); close(p.exited) }()
		t.Cleanup(func() {
			p.stop()
			if t.Failed() {
				t.Logf("pebble's output:\n%s", p.out.String())
			}
		})
		if p.waitReady(t) {
			return p
		}
		if attempt == 3 {
			t.Fatalf("pebble did not start:\n%s", p.out.String())
		}
	}
}

// waitReady polls the directory until it answers (true) or Pebble exits (false); a
// minute at most.
func (p *pebble) waitReady(t *testing.T) bool {
	t.Helper()
	for i := 0; i < 600; i++ {
		select {
		case <-p.exited:
			return false
		default:
		}
		resp, err := p.client.Get(p.dirURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pebble's directory %s did not answer within a minute:\n%s", p.dirURL, p.out.String())
	return false
}

func (p *pebble) stop() {
	p.cmd.Process.Kill()
	<-p.exited
}

// root is the root of the chains Pebble issues (a new one each time Pebble starts).
func (p *pebble) root(t *testing.T) *x509.CertPool {
	t.Helper()
	resp, err := p.client.Get(p.mgmtURL + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("pebble /roots/0: %d %v", resp.StatusCode, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble /roots/0 is not PEM: %q", b)
	}
	return pool
}

// acmeSettings are the settings for testDomain from p, caching in dir.
func (p *pebble) settings(dir string) tlsSettings {
	return tlsSettings{
		ACMEDomains:    []string{testDomain},
		ACMEEmail:      "ops@example.com",
		ACMEDirectory:  p.dirURL,
		CacheDir:       dir,
		acmeHTTPClient: p.client,
	}
}

// countChallenges counts the HTTP-01 requests that reach h.
func countChallenges(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/acme-challenge/") {
			n.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

// TestTLS_ACME_TLSALPN obtains a certificate from Pebble over TLS-ALPN-01 (the HTTP
// port refuses), checks it in a real handshake, then restarts on the cache with Pebble
// gone and gets the same certificate.
func TestTLS_ACME_TLSALPN(t *testing.T) {
	dns := startDNS(t)
	httpsLn := listen(t)
	p := startPebble(t, refusingPort(t), portOf(t, httpsLn.Addr()), dns)
	roots := p.root(t)
	cacheDir := filepath.Join(t.TempDir(), "acme")

	logger, _ := testLog(t)
	setup, err := newTLS(p.settings(cacheDir), logger)
	if err != nil {
		t.Fatal(err)
	}
	serveTLS(t, httpsLn, setup.Config, okHandler)
	// The first handshake waits while the certificate is obtained.
	leaf, err := handshake(t, httpsLn.Addr().String(), testDomain, roots, 2*time.Minute)
	if err != nil {
		t.Fatalf("handshake verified against Pebble's root: %v", err)
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != testDomain {
		t.Errorf("certificate names %q, want %s", leaf.DNSNames, testDomain)
	}
	// A request over it, as a webhook sender's client makes one.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: testDomain, RootCAs: roots}}, Timeout: time.Minute}
	resp, err := client.Get("https://" + httpsLn.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("GET over HTTPS: %d %q", resp.StatusCode, body)
	}
	// A name outside acme_domains gets no certificate (and makes no order).
	if _, err := handshake(t, httpsLn.Addr().String(), "other.example.test", roots, time.Minute); err == nil {
		t.Error("a handshake for a name outside acme_domains succeeded")
	}
	checkPrivate(t, cacheDir)

	t.Run("RestartUsesTheCache", func(t *testing.T) {
		// With Pebble gone, a certificate can only come from the cache.
		p.stop()
		logger, logs := testLog(t)
		again, err := newTLS(p.settings(cacheDir), logger)
		if err != nil {
			t.Fatal(err)
		}
		ln := listen(t)
		serveTLS(t, ln, again.Config, okHandler)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { again.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		got, err := handshake(t, ln.Addr().String(), testDomain, roots, time.Minute)
		if err != nil {
			t.Fatalf("handshake after the restart: %v", err)
		}
		if got.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
			t.Fatalf("after the restart: serial %v, want the cached %v", got.SerialNumber, leaf.SerialNumber)
		}
		waitLog(t, logs, "certificate ready")
	})
}

// TestTLS_ACMERenewalOverdueLogged has Pebble issue a certificate valid for 6 s and
// then stop, so that autocert cannot renew it: serve warns once the renewal is overdue,
// and logs an error, naming the CA that could not be reached, once it has expired.
func TestTLS_ACMERenewalOverdueLogged(t *testing.T) {
	dns := startDNS(t)
	httpsLn := listen(t)
	p := startPebbleValidity(t, refusingPort(t), portOf(t, httpsLn.Addr()), dns, 6*time.Second)
	logger, logs := testLog(t)
	s := p.settings(filepath.Join(t.TempDir(), "acme"))
	s.watch = 100 * time.Millisecond
	setup, err := newTLS(s, logger)
	if err != nil {
		t.Fatal(err)
	}
	serveTLS(t, httpsLn, setup.Config, okHandler)
	runTLS(t, setup)
	waitLog(t, logs, "certificate ready")
	p.stop() // the CA cannot be reached from now on

	waitLog(t, logs, "level=WARN msg=\"the ACME certificate was not renewed when due")
	if strings.Contains(logs.String(), "has expired") {
		t.Errorf("no warning came before the expiry:\n%s", logs.String())
	}
	waitLog(t, logs, "level=ERROR msg=\"the ACME certificate has expired and was not renewed")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "has expired") && !strings.Contains(line, "ACME CA 127.0.0.1") {
			t.Errorf("the error does not name the CA that could not be reached: %s", line)
		}
	}
}

// TestTLS_ACMECacheWriteFailureLogged puts the ACME cache on a full file system (the
// account key written before it filled up): the certificate is obtained and served, and
// that it could not be kept is logged with the cache's path and the reason.
func TestTLS_ACMECacheWriteFailureLogged(t *testing.T) {
	cacheDir := filepath.Join(t.TempDir(), "acme")
	if err := os.Mkdir(cacheDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", cacheDir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", cacheDir).Run(); err != nil {
			exec.Command("umount", "-l", cacheDir).Run()
		}
	})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cacheDir, "acme_account+key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	fill, err := os.Create(filepath.Join(cacheDir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := fill.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	fill.Close()

	dns := startDNS(t)
	httpsLn := listen(t)
	p := startPebble(t, refusingPort(t), portOf(t, httpsLn.Addr()), dns)
	logger, logs := testLog(t)
	setup, err := newTLS(p.settings(cacheDir), logger)
	if err != nil {
		t.Fatalf("newTLS: %v", err)
	}
	serveTLS(t, httpsLn, setup.Config, okHandler)
	runTLS(t, setup)
	waitLog(t, logs, "certificate ready")
	waitLog(t, logs, "could not keep a certificate in the ACME cache")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "could not keep") && (!strings.Contains(line, "level=ERROR") ||
			!strings.Contains(line, filepath.Join(cacheDir, testDomain)) || !strings.Contains(line, "no space left")) {
			t.Errorf("want an error naming the file and the reason: %s", line)
		}
	}
}

// TestTLS_FilesReloadRetriedAfterFailure: a renewed pair lands with its key unreadable
// to serve; the poll logs that once, and keeps the old certificate. Then the key's mode
// is fixed, which changes neither the files' contents, mtime, size nor inode: the next
// poll loads the renewed pair. Root reads any file, so the test runs itself again
// without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv), as a service user would.
func TestTLS_FilesReloadRetriedAfterFailure(t *testing.T) {
	if os.Getenv("HOOKDEDUP_TEST_NODAC") == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root to drop capabilities with setpriv")
		}
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("no setpriv")
		}
		cmd := exec.Command("setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--",
			os.Args[0], "-test.run", "^TestTLS_FilesReloadRetriedAfterFailure$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "HOOKDEDUP_TEST_NODAC=1")
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("child skipped:\n%s", out)
		}
		if err != nil {
			t.Fatalf("without CAP_DAC_OVERRIDE: %v\n%s", err, out)
		}
		return
	}

	dir := t.TempDir()
	certPEM, keyPEM, first := selfSigned(t, testDomain)
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certPath, certPEM)
	writeFile(t, keyPath, keyPEM)
	probe := filepath.Join(dir, "probe")
	writeFile(t, probe, []byte("x"))
	os.Chmod(probe, 0)
	if _, err := os.ReadFile(probe); err == nil {
		t.Skip("a file of mode 000 is still readable here")
	}

	logger, logs := testLog(t)
	setup, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: "127.0.0.1:0"}, logger)
	if err != nil {
		t.Fatal(err)
	}
	serving := func() *x509.Certificate {
		c, _ := setup.files.get(nil)
		return c.Leaf
	}
	if serving().SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("not serving the first certificate")
	}

	// The renewal lands, the key unreadable to us.
	newCert, newKey, second := selfSigned(t, testDomain)
	replaceFile(t, certPath, newCert)
	replaceFile(t, keyPath, newKey)
	if err := os.Chmod(keyPath, 0); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		setup.files.reloadIfChanged() // polls
	}
	if n := strings.Count(logs.String(), "certificate files not reloaded"); n != 1 {
		t.Fatalf("the unreadable key was reported %d times, want once:\n%s", n, logs.String())
	}
	// The operator fixes the mode.
	if err := os.Chmod(keyPath, 0o600); err != nil {
		t.Fatal(err)
	}
	setup.files.reloadIfChanged() // the next poll
	if got := serving(); got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after the key's mode was fixed, the poll still serves the old certificate (serial %v, want the renewed %v)\n%s",
			got.SerialNumber, second.SerialNumber, logs.String())
	}
}

// TestTLS_FilesUnverifiableChainWarned: a leaf alone in tls_cert_file, from a CA this
// system does not trust and without the chain that issued it (cert.pem instead of
// fullchain.pem), is loaded with a warning that senders will refuse it; a self-signed
// certificate, or a leaf followed by its chain, is loaded without one.
func TestTLS_FilesUnverifiableChainWarned(t *testing.T) {
	ca := newTestCA(t)
	const warning = "level=WARN msg=\"tls_cert_file holds the certificate alone, without the chain"
	leafPEM, leafKey := ca.issue(t, testDomain)
	selfPEM, selfKey, _ := selfSigned(t, testDomain)
	chainPEM := append(slices.Clone(leafPEM), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})...)
	for _, c := range []struct {
		name      string
		cert, key []byte
		warns     bool
	}{
		{"LeafAlone", leafPEM, leafKey, true},
		{"SelfSigned", selfPEM, selfKey, false},
		{"LeafAndChain", chainPEM, leafKey, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
			writeFile(t, certPath, c.cert)
			writeFile(t, keyPath, c.key)
			logger, logs := testLog(t)
			if _, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: "127.0.0.1:0"}, logger); err != nil {
				t.Fatalf("newTLS: %v", err)
			}
			if got := strings.Contains(logs.String(), warning); got != c.warns {
				t.Errorf("warned %v, want %v:\n%s", got, c.warns, logs.String())
			}
			if c.warns && !strings.Contains(logs.String(), "unknown authority") {
				t.Errorf("the warning does not give the verification's error:\n%s", logs.String())
			}
		})
	}
}

// waitLog waits (a minute at most) until logs holds want, and fails at once when they
// say a certificate could not be obtained.
func waitLog(t *testing.T, logs *lockedBuffer, want string) {
	t.Helper()
	const failed = "no certificate from the ACME CA"
	for i := 0; i < 600 && !strings.Contains(logs.String(), want) && !strings.Contains(logs.String(), failed); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), want) {
		t.Fatalf("the log does not say %q:\n%s", want, logs.String())
	}
}

// TestTLS_ACME_HTTP01 has Run obtain the certificate at start over HTTP-01 (the TLS port
// refuses, so TLS-ALPN-01 fails first) through the plain-HTTP handler.
func TestTLS_ACME_HTTP01(t *testing.T) {
	dns := startDNS(t)
	httpLn, httpsLn := listen(t), listen(t)
	p := startPebble(t, portOf(t, httpLn.Addr()), refusingPort(t), dns)
	roots := p.root(t)
	cacheDir := filepath.Join(t.TempDir(), "acme")

	logger, logs := testLog(t)
	setup, err := newTLS(p.settings(cacheDir), logger)
	if err != nil {
		t.Fatal(err)
	}
	var challenges atomic.Int64
	serveHTTP(t, httpLn, countChallenges(setup.HTTPHandler, &challenges))
	serveTLS(t, httpsLn, setup.Config, okHandler)
	runTLS(t, setup)

	waitLog(t, logs, "certificate ready")
	if challenges.Load() == 0 {
		t.Error("no HTTP-01 request reached the plain-HTTP handler")
	}
	leaf, err := handshake(t, httpsLn.Addr().String(), testDomain, roots, time.Minute)
	if err != nil {
		t.Fatalf("handshake verified against Pebble's root: %v", err)
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != testDomain {
		t.Errorf("certificate names %q, want %s", leaf.DNSNames, testDomain)
	}
	checkPrivate(t, cacheDir)

	// The plain-HTTP listener still sends the console to https and refuses webhooks.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: time.Minute}
	// Only a name of acme_domains is sent on: any other would be an open redirect.
	for host, want := range map[string]string{testDomain: "https://" + testDomain, "127.0.0.1": ""} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpLn.Addr().String()+"/events", nil)
		req.Host = host
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		switch {
		case want != "" && (resp.StatusCode != 302 || !strings.HasPrefix(loc, want)):
			t.Errorf("GET /events for %s over plain HTTP: %d to %q, want a redirect to %s", host, resp.StatusCode, loc, want)
		case want == "" && resp.StatusCode != http.StatusBadRequest:
			t.Errorf("GET /events for %s, not an acme domain, over plain HTTP: %d to %q, want 400", host, resp.StatusCode, loc)
		}
	}
	resp, err := noRedirect.Post("http://"+httpLn.Addr().String()+"/webhooks/ota", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("POST /webhooks/ota over plain HTTP: %d, want 400", resp.StatusCode)
	}
}

// TestTLS_ACMEFailureLoggedOnce: while no certificate can be had, every handshake for a
// configured domain fails, and anyone can open handshakes: the failure is logged once
// a minute per domain, not at each.
func TestTLS_ACMEFailureLoggedOnce(t *testing.T) {
	var s tlsSetup
	now := time.Now()
	for _, tc := range []struct {
		domain string
		at     time.Duration
		want   bool
	}{
		{testDomain, 0, true}, {testDomain, time.Second, false}, {"other.example", time.Second, true},
		{testDomain, 59 * time.Second, false}, {testDomain, 61 * time.Second, true}, {testDomain, 62 * time.Second, false},
	} {
		if got := s.logFailureNow(tc.domain, now.Add(tc.at)); got != tc.want {
			t.Errorf("%s at +%v: log %v, want %v", tc.domain, tc.at, got, tc.want)
		}
	}
}

// TestTLS_FilesExpiryLogged: a certificate from files that nothing replaces is warned of
// once it is past the point where a renewal on schedule would have replaced it (once a
// day), and logged as an error once it has expired (once a minute), though the files
// never change.
func TestTLS_FilesExpiryLogged(t *testing.T) {
	ca := newTestCA(t)
	certPath, keyPath := ca.files(t, t.TempDir(), testDomain)
	logger, logs := testLog(t)
	setup, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: "127.0.0.1:0"}, logger)
	if err != nil {
		t.Fatal(err)
	}
	notAfter := setup.files.cur.Load().Leaf.NotAfter
	const warning, expired = "has not been replaced", "level=ERROR msg=\"the certificate from tls_cert_file has expired"
	for _, tc := range []struct {
		at             time.Time
		warns, expires int // counts in the log so far
	}{
		{time.Now(), 0, 0},
		{notAfter.Add(-time.Hour), 1, 0},
		{notAfter.Add(-30 * time.Minute), 1, 0},
		{notAfter.Add(time.Minute), 1, 1},
		{notAfter.Add(90 * time.Second), 1, 1},
		{notAfter.Add(150 * time.Second), 1, 2},
	} {
		setup.checkFiles(tc.at)
		if w, e := strings.Count(logs.String(), warning), strings.Count(logs.String(), expired); w != tc.warns || e != tc.expires {
			t.Fatalf("at %s (expiry %s): %d warnings and %d errors, want %d and %d:\n%s",
				tc.at.Format(time.RFC3339), notAfter.Format(time.RFC3339), w, e, tc.warns, tc.expires, logs.String())
		}
	}
}

// TestTLS_PlainHTTPOpaqueTarget: a request to the plain-HTTP listener whose target is
// in absolute form with an opaque part ("x:@evil.example/phish"), under the certified
// Host, is not redirected to another host: "https://<certified host>" followed by that
// target would be a Location whose host is evil.example. With certificate files and
// with ACME alike, it is refused, and a path's redirect keeps its query.
func TestTLS_PlainHTTPOpaqueTarget(t *testing.T) {
	certPath, keyPath := newTestCA(t).files(t, t.TempDir(), testDomain)
	files, err := newTLS(tlsSettings{CertFile: certPath, KeyFile: keyPath, Addr: ":443"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	acme, err := newTLS(tlsSettings{ACMEDomains: []string{testDomain}, CacheDir: filepath.Join(t.TempDir(), "acme"), Addr: ":443"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Files", func(t *testing.T) { checkRedirectStaysHome(t, files.HTTPHandler) })
	t.Run("ACME", func(t *testing.T) { checkRedirectStaysHome(t, acme.HTTPHandler) })
}

func checkRedirectStaysHome(t *testing.T, h http.Handler) {
	ln := listen(t)
	serveHTTP(t, ln, h)

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET x:@evil.example/phish HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", testDomain)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusBadRequest || loc != "" {
		t.Errorf("an opaque target: %d to %q, want 400 and no redirect", resp.StatusCode, loc)
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/webhooks/ota?a=1&b=%2F", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = testDomain
	resp, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc, want := resp.Header.Get("Location"), "https://"+testDomain+"/webhooks/ota?a=1&b=%2F"; resp.StatusCode != http.StatusFound || loc != want {
		t.Errorf("a path: %d to %q, want 302 to %q", resp.StatusCode, loc, want)
	}
}

// runTLS runs setup (tlsSetup.Run) until the test ends, and waits for it to return.
func runTLS(t *testing.T, setup *tlsSetup) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { setup.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}
