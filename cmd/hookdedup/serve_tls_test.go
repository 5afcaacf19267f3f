package main

import (
	"bytes"
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
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// tlsOTASecret signs the deliveries of the HTTPS tests.
const tlsOTASecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// selfSigned returns a self-signed certificate for names and 127.0.0.1 in PEM, as
// `openssl req -x509` makes one, its PEM key, and the certificate parsed. Its serial is
// of fixed width, so that two such certificates differ in length by the signature alone.
func selfSigned(t *testing.T, names ...string) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1<<62 + testSerial.Add(1)),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), cert
}

// trusting returns a client that trusts roots alone, for serverName ("" for the URL's
// host), and shows redirects instead of following them.
func trusting(roots *x509.CertPool, serverName string) *http.Client {
	return &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       time.Minute,
	}
}

// postSigned sends one delivery of event id to the ota source at base, signed with
// tlsOTASecret as a standard-webhooks provider signs it, and returns the answer.
func postSigned(t *testing.T, client *http.Client, base, id string) (*http.Response, string) {
	t.Helper()
	body := []byte(`{"property_id":"HTL-1","booking_id":"BK-` + id + `","status":"confirmed","effective_date":"2026-12-24"}`)
	v, err := signature.New(signature.Config{Scheme: "standard-webhooks", Secrets: []string{tlsOTASecret}})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id}}
	if err := v.Sign(h, url.Values{}, body, time.Now()); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/ota", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s/webhooks/ota: %v", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// servingAttr returns the value of key in the "serving" line of the log at path, which
// serve writes before it prints that it listens.
func servingAttr(t *testing.T, path, key string) string {
	t.Helper()
	log, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)msg=serving .*? ` + key + `=(\S+)`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("the serving line of %s has no %s:\n%s", path, key, log)
	}
	return string(m[1])
}

// waitLogFile waits (two minutes at most) until the file at path holds want, and fails at
// once when it holds failure.
func waitLogFile(t *testing.T, path, want, failure string) {
	t.Helper()
	var log []byte
	for i := 0; i < 1200; i++ {
		log, _ = os.ReadFile(path)
		if bytes.Contains(log, []byte(want)) {
			return
		}
		if failure != "" && bytes.Contains(log, []byte(failure)) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s does not say %q:\n%s", path, want, log)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsFilesConfig writes into dir a self-signed certificate for testDomain and a
// configuration that serves HTTPS with it, the console on plain HTTP, and one source;
// it returns the certificate, the files' paths and the configuration's.
func tlsFilesConfig(t *testing.T, dir string) (cert *x509.Certificate, certPath, keyPath, cfgPath string) {
	t.Helper()
	certPEM, keyPEM, cert := selfSigned(t, testDomain)
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certPath, certPEM)
	writeFile(t, keyPath, keyPEM)
	cfgPath = filepath.Join(dir, "hookdedup.toml")
	writeFile(t, cfgPath, fmt.Appendf(nil, `
tls_cert_file = %q
tls_key_file  = %q
http_addr     = "127.0.0.1:0"
console_addr  = "127.0.0.1:0"

[[source]]
name      = "ota"
signature = "standard-webhooks"
secret    = %q
`, certPath, keyPath, tlsOTASecret))
	return cert, certPath, keyPath, cfgPath
}

// TestServe_TLSFiles runs the binary with a self-signed certificate from files: a signed
// webhook over HTTPS is accepted, plain HTTP on http_addr redirects a browser and refuses
// a webhook, the console on console_addr stays plain HTTP, and SIGHUP serves a new pair
// that the poll of the files could not have noticed.
func TestServe_TLSFiles(t *testing.T) {
	dir := t.TempDir()
	first, certPath, keyPath, cfgPath := tlsFilesConfig(t, dir)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir, nil, "--config", cfgPath)
	if !strings.HasPrefix(s.url, "https://127.0.0.1:") {
		t.Fatalf("serve listens on %s, want an https:// URL", s.url)
	}
	logPath := filepath.Join(dir, "serve.log")
	plain := "http://" + servingAttr(t, logPath, "http_addr")
	console := "http://" + servingAttr(t, logPath, "console_addr")
	roots := x509.NewCertPool()
	roots.AddCert(first)

	t.Run("SignedWebhook", func(t *testing.T) {
		resp, body := postSigned(t, trusting(roots, ""), s.url, "msg_https_1")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"status":"accepted"`) {
			t.Fatalf("signed webhook over HTTPS: %s %s", resp.Status, body)
		}
		if resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(first.SerialNumber) != 0 {
			t.Errorf("the answer did not come over TLS with the configured certificate")
		}
		// The health probes are on the public address, over HTTPS too.
		resp, err := trusting(roots, "").Get(s.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /readyz over HTTPS: %s", resp.Status)
		}
	})

	t.Run("PlainHTTP", func(t *testing.T) {
		resp, _ := call(t, http.MethodGet, plain+"/events?source=ota", "", "")
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != s.url+"/events?source=ota" {
			t.Errorf("GET /events over plain HTTP: %s to %q, want 302 to %s/events?source=ota", resp.Status, loc, s.url)
		}
		resp, body := postSigned(t, noRedirects, plain, "msg_plain_1")
		var answer struct{ Error string }
		if err := json.Unmarshal([]byte(body), &answer); err != nil || resp.StatusCode != http.StatusBadRequest ||
			resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(answer.Error, "send the request to "+s.url+"/webhooks/ota") {
			t.Errorf("POST /webhooks/ota over plain HTTP: %s %q %q, want 400 and a JSON error naming %s/webhooks/ota",
				resp.Status, resp.Header.Get("Content-Type"), body, s.url)
		}
	})

	t.Run("ConsoleStaysPlain", func(t *testing.T) {
		resp, body := call(t, http.MethodGet, console+"/login", "", "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<form") {
			t.Errorf("GET /login on console_addr over plain HTTP: %s", resp.Status)
		}
	})

	t.Run("SIGHUP", func(t *testing.T) {
		// The new pair is written in place with the old files' sizes and times: the poll
		// sees nothing change, so only the signal can make serve read it.
		var newCert, newKey []byte
		var second *x509.Certificate
		for i := 0; i < 100 && len(newCert) != len(certPEM); i++ {
			newCert, newKey, second = selfSigned(t, testDomain)
		}
		if len(newCert) != len(certPEM) || len(newKey) != len(keyPEM) {
			t.Fatalf("no new pair of the old sizes (%d, %d) in 100 tries", len(certPEM), len(keyPEM))
		}
		for _, f := range []struct {
			path string
			data []byte
		}{{certPath, newCert}, {keyPath, newKey}} {
			before, err := os.Stat(f.path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, f.path, f.data)
			if err := os.Chtimes(f.path, before.ModTime(), before.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		now := x509.NewCertPool()
		now.AddCert(second)
		addr := strings.TrimPrefix(s.url, "https://")
		var leaf *x509.Certificate
		for i := 0; i < 600; i++ { // a minute at most
			if leaf, _ = handshake(t, addr, "", now, 10*time.Second); leaf != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if leaf == nil || leaf.SerialNumber.Cmp(second.SerialNumber) != 0 {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("after SIGHUP serve does not serve the new certificate:\n%s", log)
		}
		waitLogFile(t, logPath, "SIGHUP: reloading the certificate files", "")
		resp, body := postSigned(t, trusting(now, ""), s.url, "msg_https_2")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("signed webhook after the reload: %s %s", resp.Status, body)
		}
	})

	s.stop(t) // the plain-HTTP listener stops with the others: a clean exit
}

// TestServe_TLSACME runs the binary with acme_domains against Pebble: serve obtains its
// certificate at start, a signed webhook over HTTPS is accepted by a client that trusts
// only Pebble's root, and a restart with Pebble gone serves the cached certificate.
func TestServe_TLSACME(t *testing.T) {
	dns := startDNS(t)
	httpsPort, httpPort := freePort(t), freePort(t)
	p := startPebble(t, httpPort, httpsPort, dns)
	roots := p.root(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hookdedup.toml")
	writeFile(t, cfgPath, fmt.Appendf(nil, `
addr           = "127.0.0.1:%d"
http_addr      = "127.0.0.1:%d"
acme_domains   = [%q]
acme_email     = "ops@example.com"
acme_directory = %q

[[source]]
name      = "ota"
signature = "standard-webhooks"
secret    = %q
`, httpsPort, httpPort, testDomain, p.dirURL, tlsOTASecret))
	// Pebble's directory is served over HTTPS with a certificate of the test's own CA,
	// which serve trusts as Go trusts any extra root: SSL_CERT_FILE.
	env := []string{"SSL_CERT_FILE=" + p.caFile}
	addr := fmt.Sprintf("127.0.0.1:%d", httpsPort)
	const failed = "no certificate from the ACME CA"

	s := startLogged(t, dir, "serve.log", env, "--config", cfgPath, "--addr", addr)
	waitLogFile(t, filepath.Join(dir, "serve.log"), "certificate ready", failed)
	client := trusting(roots, testDomain)
	resp, body := postSigned(t, client, "https://"+addr, "msg_acme_1")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"status":"accepted"`) {
		t.Fatalf("signed webhook over HTTPS: %s %s", resp.Status, body)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != testDomain {
		t.Errorf("certificate names %q, want %s", leaf.DNSNames, testDomain)
	}
	checkPrivate(t, filepath.Join(dir, "acme"))
	s.stop(t)

	// With Pebble gone, a certificate can only come from the cache beside the database.
	p.stop()
	startLogged(t, dir, "serve-again.log", env, "--config", cfgPath, "--addr", addr)
	waitLogFile(t, filepath.Join(dir, "serve-again.log"), "certificate ready", failed)
	resp, body = postSigned(t, client, "https://"+addr, "msg_acme_2")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("signed webhook after the restart: %s %s", resp.Status, body)
	}
	if again := resp.TLS.PeerCertificates[0]; again.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Errorf("after the restart: serial %v, want the cached %v", again.SerialNumber, leaf.SerialNumber)
	}
}

// TestConfig_TLS reads the HTTPS settings from the file, the environment and flags, in
// that order of precedence (acme_domains a list in the file, comma-separated elsewhere),
// and refuses at load, naming the setting, what could not serve, and a value that names
// no domain, which would turn off the HTTPS the file asks for.
func TestConfig_TLS(t *testing.T) {
	load := func(toml string, vars map[string]string, args ...string) (config, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "h.toml")
		writeFile(t, path, []byte(toml))
		e := env{getenv: func(k string) string { return vars[k] }, stderr: &bytes.Buffer{}}
		f := newFlags("serve", e)
		if _, err := f.parse(append([]string{"--config", path}, args...)); err != nil {
			t.Fatal(err)
		}
		return f.load(e)
	}
	file := `
acme_domains   = ["hooks.example.com", "hooks2.example.com"]
acme_email     = "ops@example.com"
acme_directory = "https://acme-staging-v02.api.letsencrypt.org/directory"
http_addr      = "0.0.0.0:8090"
`
	type got struct{ cert, key, domains, email, directory, httpAddr string }
	for _, c := range []struct {
		name string
		toml string
		vars map[string]string
		args []string
		want got
	}{
		{"Defaults", "", nil, nil, got{}},
		{"File", file, nil, nil, got{"", "", "hooks.example.com hooks2.example.com", "ops@example.com", "https://acme-staging-v02.api.letsencrypt.org/directory", "0.0.0.0:8090"}},
		{"Environment", file, map[string]string{
			"HOOKDEDUP_ACME_DOMAINS": "a.example.com, b.example.com", "HOOKDEDUP_ACME_EMAIL": "env@example.com",
			"HOOKDEDUP_ACME_DIRECTORY": "https://acme.example/dir", "HOOKDEDUP_HTTP_ADDR": "0.0.0.0:8091",
		}, nil, got{"", "", "a.example.com b.example.com", "env@example.com", "https://acme.example/dir", "0.0.0.0:8091"}},
		{"Flags", file, map[string]string{"HOOKDEDUP_ACME_DOMAINS": "a.example.com"},
			[]string{"--acme-domains", "c.example.com", "--acme-email", "flag@example.com", "--http-addr", "[::]:8082"},
			got{"", "", "c.example.com", "flag@example.com", "https://acme-staging-v02.api.letsencrypt.org/directory", "[::]:8082"}},
		{"Files", "tls_cert_file = \"/etc/hookdedup/cert.pem\"\n", map[string]string{"HOOKDEDUP_TLS_KEY_FILE": "/etc/hookdedup/key.pem"},
			nil, got{"/etc/hookdedup/cert.pem", "/etc/hookdedup/key.pem", "", "", "", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(c.toml, c.vars, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			g := got{cfg.TLSCertFile, cfg.TLSKeyFile, strings.Join(cfg.ACMEDomains, " "), cfg.ACMEEmail, cfg.ACMEDirectory, cfg.HTTPAddr}
			if g != c.want {
				t.Errorf("got %+v, want %+v", g, c.want)
			}
		})
	}

	for _, c := range []struct {
		name, toml string
		vars       map[string]string
		args       []string
		want       string
	}{
		{"CertWithoutKey", `tls_cert_file = "/etc/hookdedup/cert.pem"`, nil, nil, "tls_cert_file is set but tls_key_file is not"},
		{"FilesAndACME", "tls_cert_file = \"c.pem\"\ntls_key_file = \"k.pem\"", nil, []string{"--acme-domains", "hooks.example.com"}, "choose certificate files or ACME"},
		{"BadDomainInEnv", "", map[string]string{"HOOKDEDUP_ACME_DOMAINS": "hooks.example.com,https://hooks.example.com"}, nil, `acme_domains: "https://hooks.example.com" is not a host name`},
		{"BlankDomainsInEnv", `acme_domains = ["hooks.example.com"]`, map[string]string{"HOOKDEDUP_ACME_DOMAINS": " "}, nil, `HOOKDEDUP_ACME_DOMAINS: " " names no domain`},
		{"EmptyDomainsFlag", `acme_domains = ["hooks.example.com"]`, nil, []string{"--acme-domains", ""}, `acme-domains: "" names no domain`},
		{"CommasForDomainsFlag", "", nil, []string{"--acme-domains", " , "}, `acme-domains: " , " names no domain`},
		{"EmailWithoutDomains", `acme_email = "ops@example.com"`, nil, nil, "acme_email is set but acme_domains is empty"},
		{"PlainDirectory", "acme_domains = [\"hooks.example.com\"]\nacme_directory = \"http://acme.example/dir\"", nil, nil, "acme_directory"},
		{"HTTPAddrWithoutHTTPS", `http_addr = "0.0.0.0:80"`, nil, nil, "http_addr is set but HTTPS is not"},
		{"HTTPAddrNotHostPort", "acme_domains = [\"hooks.example.com\"]\nhttp_addr = \"80\"", nil, nil, `http_addr "80" is not host:port`},
		{"HTTPAddrIsAddr", "acme_domains = [\"hooks.example.com\"]\naddr = \":80\"", nil, nil, `http_addr ":80" is the same as addr`},
		{"HTTPAddrOnAddrsInterface", "acme_domains = [\"hooks.example.com\"]\naddr = \"0.0.0.0:8443\"\nhttp_addr = \"127.0.0.1:8443\"", nil, nil, `http_addr "127.0.0.1:8443" is the same as addr`},
		{"HTTPAddrIsConsoleAddr", "acme_domains = [\"hooks.example.com\"]\nconsole_addr = \"127.0.0.1:8081\"\nhttp_addr = \"127.0.0.1:8081\"", nil, nil, "is the same as console_addr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(c.toml, c.vars, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestServe_TLSConsoleWarning: with HTTPS on, a console_addr on a public address is
// served in plain HTTP, and serve says so at start; on loopback it does not.
func TestServe_TLSConsoleWarning(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, _ := selfSigned(t, testDomain)
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certPath, certPEM)
	writeFile(t, keyPath, keyPEM)
	files := fmt.Sprintf("tls_cert_file = %q\ntls_key_file = %q\nhttp_addr = \"127.0.0.1:0\"\n", certPath, keyPath)
	const warning = "serves plain HTTP on an address that is neither loopback nor private"
	for _, c := range []struct {
		console string
		warns   bool
	}{
		{"0.0.0.0:0", true},
		{"127.0.0.1:0", false},
	} {
		t.Run(c.console, func(t *testing.T) {
			s := runServeInProcess(t, files+"console_addr = \""+c.console+"\"\n", nil, "--addr", "127.0.0.1:0")
			if !strings.HasPrefix(s.p.public.url(), "https://") || !strings.HasPrefix(s.p.console.url(), "http://") {
				t.Errorf("public %s, console %s: want HTTPS on addr alone", s.p.public.url(), s.p.console.url())
			}
			plainURL := s.p.plain.url()
			s.stop()
			if want := "hookdedup plain HTTP on " + plainURL + " "; !strings.Contains(s.stdout.String(), want) {
				t.Errorf("stdout %q does not say %q", s.stdout.String(), want)
			}
			if got := strings.Contains(s.stderr.String(), warning); got != c.warns {
				t.Errorf("console_addr %s: warned %v, want %v:\n%s", c.console, got, c.warns, s.stderr.String())
			}
		})
	}
}

func TestServe_TLSPrivateAddr(t *testing.T) {
	for ip, want := range map[string]bool{
		"127.0.0.1": true, "::1": true, "10.8.0.1": true, "192.168.1.20": true, "172.16.0.1": true,
		"100.101.102.103": true, "fd7a:115c:a1e0::1": true, "fe80::1": true,
		"0.0.0.0": false, "::": false, "203.0.113.5": false, "100.128.0.1": false, "2001:db8::1": false,
	} {
		if got := privateAddr(&net.TCPAddr{IP: net.ParseIP(ip), Port: 8081}); got != want {
			t.Errorf("privateAddr(%s) = %v, want %v", ip, got, want)
		}
	}
}

// TestServe_SIGHUPWithoutTLS: without HTTPS, SIGHUP is logged and changes nothing: its
// default action would end serve on the spot, with requests in flight unanswered.
func TestServe_SIGHUPWithoutTLS(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hookdedup.toml")
	writeFile(t, cfgPath, []byte(openSource))
	s := startServe(t, dir, nil, "--config", cfgPath)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogFile(t, filepath.Join(dir, "serve.log"), "SIGHUP: nothing to reload", "")
	resp, err := http.Post(s.url+"/webhooks/open", "application/json", strings.NewReader(`{"id":"evt_after_hup"}`))
	if err != nil {
		t.Fatalf("serve stopped answering after SIGHUP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook after SIGHUP: %s", resp.Status)
	}
}

// TestServe_TLSSlowHeadersEndAfterReadHeaderTimeout opens HTTPS connections that begin
// a request and never finish its headers, over HTTP/1.1 and over HTTP/2 (a HEADERS frame
// without END_HEADERS): both are closed once read_header_timeout has passed, not kept
// until idle_timeout.
func TestServe_TLSSlowHeadersEndAfterReadHeaderTimeout(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, _ := selfSigned(t, testDomain)
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certPath, certPEM)
	writeFile(t, keyPath, keyPEM)
	s := runServeInProcess(t, fmt.Sprintf(`addr = "127.0.0.1:0"
http_addr = "127.0.0.1:0"
console_addr = "127.0.0.1:0"
tls_cert_file = %q
tls_key_file = %q
read_header_timeout = "1s"
read_timeout = "3s"
`+openSource, certPath, keyPath), nil)
	addr := s.p.public.ln.Addr().String()

	// openFor reports how long the server kept a connection open (up to limit) after
	// send wrote an unfinished request on it.
	openFor := func(proto string, send func(c *tls.Conn), limit time.Duration) (time.Duration, bool) {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := c.ConnectionState().NegotiatedProtocol; got != proto {
			t.Fatalf("negotiated %q, want %q", got, proto)
		}
		start := time.Now()
		send(c)
		c.SetReadDeadline(start.Add(limit))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return time.Since(start), true // still open
				}
				return time.Since(start), false
			}
		}
	}

	// HTTP/1.1: the unfinished headers end the connection after read_header_timeout.
	d, open := openFor("http/1.1", func(c *tls.Conn) {
		fmt.Fprintf(c, "POST /webhooks/open HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", testDomain)
	}, 4*time.Second)
	if open {
		t.Fatalf("HTTP/1.1: the connection with unfinished headers was still open after %v", d)
	}

	// HTTP/2: a HEADERS frame without END_HEADERS, and no CONTINUATION.
	d, open = openFor("h2", func(c *tls.Conn) {
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
		var block bytes.Buffer
		enc := hpack.NewEncoder(&block)
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
			{Name: ":authority", Value: testDomain}, {Name: ":path", Value: "/webhooks/open"}} {
			enc.WriteField(f)
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: false}); err != nil {
			t.Fatal(err)
		}
	}, 4*time.Second)
	if open {
		t.Errorf("HTTP/2: the connection with unfinished headers was still open %v after they began (read_header_timeout 1s)", d.Round(100*time.Millisecond))
	}

	// A connection whose first request came in time stays open past it for the next.
	var h2only http.Protocols
	h2only.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, Protocols: &h2only}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var conns atomic.Int32
	trace := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			if !i.Reused {
				conns.Add(1)
			}
		},
	})
	for i := range 2 {
		if i > 0 {
			time.Sleep(1500 * time.Millisecond)
		}
		req, _ := http.NewRequestWithContext(trace, "GET", "https://"+addr+"/healthz", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("HTTP/2 request %d: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("request %d went over %s, want HTTP/2", i+1, resp.Proto)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("HTTP/2: two requests 1.5 s apart took %d connections, want 1", n)
	}
}
