package main

// HTTPS for serve: a certificate either from files (reloaded when they change or on
// SIGHUP) or from an ACME CA through autocert, and the handler of the plain-HTTP listener,
// which answers ACME's HTTP-01 challenges and sends everything else to https.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookdedup/hookdedup/receiver/alert"
	"github.com/hookdedup/hookdedup/storage"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
	"golang.org/x/net/idna"
)

const (
	// defaultACMEDirectory is Let's Encrypt's production directory.
	defaultACMEDirectory = acme.LetsEncryptURL
	// defaultHTTPAddr is where the plain-HTTP listener goes when HTTPS is on: ACME's
	// HTTP-01 challenge always comes to port 80.
	defaultHTTPAddr = ":80"
	// certPollInterval is how often tls_cert_file and tls_key_file are checked for a
	// change. Two stat calls: nothing, next to the certificate tools' own schedules.
	certPollInterval = 5 * time.Second
	// certWatchInterval is how often an ACME certificate's validity is checked, and so
	// how often a renewal that is overdue, or a certificate that has expired, is logged.
	certWatchInterval = time.Minute
)

// tlsSettings are the configuration's HTTPS settings.
type tlsSettings struct {
	CertFile string // tls_cert_file: PEM certificate chain, leaf first
	KeyFile  string // tls_key_file: PEM private key of the leaf

	ACMEDomains   []string // acme_domains: the names to obtain certificates for
	ACMEEmail     string   // acme_email: optional contact for the CA's expiry notices
	ACMEDirectory string   // acme_directory: "" is Let's Encrypt's production directory
	// CacheDir keeps the ACME account key and the certificates across restarts, so a
	// restart does not ask the CA again; acmeCacheDir gives the default.
	CacheDir string

	// Addr is the HTTPS listener's address (the config's addr); the plain-HTTP
	// redirect names its port unless it is 443.
	Addr string
	// HTTPAddr is the plain-HTTP listener's address; "" is defaultHTTPAddr.
	HTTPAddr string

	// acmeHTTPClient, when set, talks to the ACME directory: a test trusts its own CA
	// through it. nil is the system's roots.
	acmeHTTPClient *http.Client
	// poll is how often the certificate files are checked; 0 is certPollInterval.
	poll time.Duration
	// watch is how often the ACME certificates' validity is checked; 0 is
	// certWatchInterval.
	watch time.Duration
}

// enabled reports whether the settings ask for HTTPS at all.
func (s tlsSettings) enabled() bool {
	return s.CertFile != "" || s.KeyFile != "" || len(s.ACMEDomains) > 0
}

// httpAddr is the plain-HTTP listener's address.
func (s tlsSettings) httpAddr() string {
	if s.HTTPAddr == "" {
		return defaultHTTPAddr
	}
	return s.HTTPAddr
}

// acmeCacheDir is where the ACME state lives: the directory "acme" beside a SQLite
// database, or in the working directory for a database server (the service's state
// directory).
func acmeCacheDir(database string) string {
	if isPostgres(database) {
		return "acme"
	}
	return filepath.Join(filepath.Dir(database), "acme")
}

// settingsError is an error of the settings it names: the ones to look at, among those
// a check reads together.
type settingsError struct {
	error
	names []string
}

func (e settingsError) Unwrap() error { return e.error }

// about says that err is of the settings names.
func about(err error, names ...string) error { return settingsError{err, names} }

// validate checks the settings together and one by one; each error names the setting.
func (s tlsSettings) validate() error {
	switch {
	case s.CertFile != "" && s.KeyFile == "":
		return about(errors.New("tls_cert_file is set but tls_key_file is not: HTTPS from files needs both"), "tls_cert_file")
	case s.KeyFile != "" && s.CertFile == "":
		return about(errors.New("tls_key_file is set but tls_cert_file is not: HTTPS from files needs both"), "tls_key_file")
	case s.CertFile != "" && len(s.ACMEDomains) > 0:
		return about(errors.New("tls_cert_file and acme_domains are both set: choose certificate files or ACME, not both"), "tls_cert_file", "acme_domains")
	case len(s.ACMEDomains) == 0 && s.ACMEEmail != "":
		return about(errors.New("acme_email is set but acme_domains is empty: name the domains to obtain certificates for"), "acme_email", "acme_domains")
	case len(s.ACMEDomains) == 0 && s.ACMEDirectory != "":
		return about(errors.New("acme_directory is set but acme_domains is empty: name the domains to obtain certificates for"), "acme_directory", "acme_domains")
	}
	if _, err := acmeDomains(s.ACMEDomains); err != nil {
		return about(err, "acme_domains")
	}
	if s.ACMEEmail != "" {
		a, err := mail.ParseAddress(s.ACMEEmail)
		if err != nil || a.Address != s.ACMEEmail {
			return about(fmt.Errorf("acme_email %q is not a plain e-mail address (write it like ops@example.com)", s.ACMEEmail), "acme_email")
		}
	}
	if s.ACMEDirectory != "" {
		if why := alert.URLProblem(s.ACMEDirectory, true); why != "" {
			return about(fmt.Errorf("acme_directory is not an https:// URL (ACME directories are served over HTTPS): %s", why), "acme_directory")
		}
	}
	if s.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(s.HTTPAddr); err != nil {
			return about(fmt.Errorf("http_addr %q is not host:port", s.HTTPAddr), "http_addr")
		}
	}
	return nil
}

// acmeDomains checks acme_domains and returns them in ASCII (an internationalised name
// in its xn-- form), lower case, without repeats.
func acmeDomains(list []string) ([]string, error) {
	var out []string
	for _, d := range list {
		name, err := checkDomain(d)
		if err != nil {
			return nil, fmt.Errorf("acme_domains: %q %s", d, err)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// checkDomain returns d's ASCII form, or why a CA would not issue for it over HTTP-01 or
// TLS-ALPN-01.
func checkDomain(d string) (string, error) {
	switch {
	case d == "":
		return "", errors.New("is empty")
	case strings.HasPrefix(d, "*."):
		return "", errors.New("is a wildcard: wildcard certificates need the DNS-01 challenge, which hookdedup does not answer; list each name")
	case net.ParseIP(d) != nil:
		return "", errors.New("is an IP address: ACME certificates here name hosts")
	}
	name, err := hostName(d)
	if err != nil {
		return "", err
	}
	if !strings.Contains(name, ".") {
		return "", errors.New("is not a fully qualified name (a CA issues for names like hooks.example.com)")
	}
	return name, nil
}

// hostName returns the host name d as a browser sends it in Host: in ASCII (an
// internationalised name in its xn-- form), lower case, without a trailing dot; or why
// it is none.
func hostName(d string) (string, error) {
	if strings.Contains(d, "://") || strings.ContainsAny(d, "/:[]@") {
		return "", errors.New("is not a host name (write it like hooks.example.com, without scheme, port or path)")
	}
	name, err := idna.Lookup.ToASCII(strings.TrimSuffix(d, "."))
	if err != nil || name == "" {
		return "", errors.New("is not a valid host name")
	}
	if p := alert.HostNameProblem(name); p != "" {
		return "", errors.New(p)
	}
	return name, nil
}

// tlsSetup is HTTPS, ready for serve's listeners.
type tlsSetup struct {
	// Config is the HTTPS listener's: TLS 1.2 or later, its certificate chosen at each
	// handshake, so a new one serves new connections while open ones keep theirs.
	Config *tls.Config
	// HTTPHandler is the plain-HTTP listener's: ACME HTTP-01 challenges, a redirect to
	// https for GET and HEAD, and a JSON 400 naming the https URL for any other method.
	HTTPHandler http.Handler
	// HTTPAddr is where the plain-HTTP listener goes.
	HTTPAddr string

	log     *slog.Logger
	files   *certFiles        // nil under ACME
	acme    *autocert.Manager // nil with files
	domains []string          // under ACME
	poll    time.Duration
	watch   time.Duration

	// failMu guards failLogged: when a failure to get a certificate for each domain was
	// last logged (and, under other keys, a failure to cache one, or a renewal that is
	// overdue). Every handshake asks, and anyone can open handshakes.
	failMu     sync.Mutex
	failLogged map[string]time.Time

	// heldMu guards held, the domains that have a certificate in autocert's memory:
	// only those are watched, since asking autocert for any other would order one.
	heldMu sync.Mutex
	held   map[string]bool

	// lastFailure is the last error met talking to the CA or writing the cache, with
	// its time: autocert keeps a failed renewal's error to itself, and this is the
	// nearest to it that a warning of an overdue renewal can name.
	lastFailure atomic.Pointer[timedError]

	// gate puts off the orders of a domain whose last order failed.
	gate orderGate
}

// timedError is an error and when it happened.
type timedError struct {
	at  time.Time
	err error
}

// acmeFailureLogEvery bounds how often a failure to get a certificate is logged, per
// domain.
const acmeFailureLogEvery = time.Minute

// newTLS checks s and prepares HTTPS: with files, it loads them now (an error names the
// file that is missing, unreadable or does not match); with ACME, it creates the cache
// directory. It returns an error when s does not ask for HTTPS.
func newTLS(s tlsSettings, log *slog.Logger) (*tlsSetup, error) {
	if !s.enabled() {
		return nil, errors.New("HTTPS is not configured: set tls_cert_file and tls_key_file, or acme_domains")
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	log = log.With(logComponent, "tls")
	t := &tlsSetup{
		HTTPAddr: s.httpAddr(),
		log:      log,
		poll:     s.poll,
		watch:    s.watch,
	}
	if t.poll <= 0 {
		t.poll = certPollInterval
	}
	if t.watch <= 0 {
		t.watch = certWatchInterval
	}
	httpsPort := "443"
	if _, p, err := net.SplitHostPort(s.Addr); err == nil && p != "" {
		httpsPort = p
	}
	if s.CertFile != "" {
		t.files = &certFiles{certPath: s.CertFile, keyPath: s.KeyFile, log: log}
		if err := t.files.reload(); err != nil {
			return nil, err
		}
		toHTTPS := redirectToHTTPS(httpsPort, func(host string) bool {
			return t.files.cur.Load().Leaf.VerifyHostname(host) == nil
		})
		t.Config = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: t.files.get,
			NextProtos:     []string{"h2", "http/1.1"},
		}
		t.HTTPHandler = toHTTPS
		return t, nil
	}

	domains, _ := acmeDomains(s.ACMEDomains) // validated above
	t.domains = domains
	toHTTPS := redirectToHTTPS(httpsPort, func(host string) bool {
		return hostPolicy(domains)(context.Background(), host) == nil
	})
	dir := s.CacheDir
	if dir == "" {
		return nil, errors.New("acme: no cache directory given")
	}
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	directory := s.ACMEDirectory
	if directory == "" {
		directory = defaultACMEDirectory
	}
	if err := cacheOf(dir, directory, log); err != nil {
		return nil, err
	}
	client := &http.Client{}
	if s.acmeHTTPClient != nil {
		*client = *s.acmeHTTPClient
	}
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	client.Transport = noteErrors{next: base, note: t.noteFailure}
	t.acme = &autocert.Manager{
		// Configuring acme_domains is the operator's acceptance of the CA's terms, as
		// with every ACME client that runs unattended.
		Prompt:     autocert.AcceptTOS,
		Cache:      loggedCache{DirCache: autocert.DirCache(dir), dir: dir, t: t},
		HostPolicy: hostPolicy(domains),
		Email:      s.ACMEEmail,
		Client: &acme.Client{
			DirectoryURL: directory,
			HTTPClient:   client,
			UserAgent:    "hookdedup",
		},
	}
	t.Config = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: t.acmeCertificate,
		// acme-tls/1 lets the CA validate over this listener (TLS-ALPN-01); autocert
		// answers such a handshake with the challenge certificate only.
		NextProtos: []string{"h2", "http/1.1", acme.ALPNProto},
	}
	t.HTTPHandler = t.acme.HTTPHandler(toHTTPS)
	if !portIs(s.Addr, "443") && !portIs(t.HTTPAddr, "80") {
		log.Warn("ACME validates on ports 443 (addr) and 80 (the plain-HTTP listener) of each domain; neither listens there, so a certificate can only be obtained if a port forward or firewall rule leads there",
			logAddr, s.Addr, logHTTPAddr, t.HTTPAddr)
	}
	log.Info("HTTPS by ACME", logDomains, strings.Join(domains, ","), logDirectory, directory, logCache, dir)
	return t, nil
}

// portIs reports whether addr's port is port.
func portIs(addr, port string) bool {
	_, p, err := net.SplitHostPort(addr)
	return err == nil && p == port
}

// privateDir creates dir 0700, or tightens it to 0700, and tightens the files in it to
// 0600: it holds the ACME account key and the certificates' private keys. autocert's
// DirCache writes 0600 files itself, but not into a directory someone made wider.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("acme cache %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("acme cache %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("acme cache %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("acme cache %s: %w", dir, err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(filepath.Join(dir, e.Name()), 0o600); err != nil {
				return fmt.Errorf("acme cache %s: %w", dir, err)
			}
		}
	}
	return nil
}

// acmeDirectoryFile is the file of the ACME cache that names the directory its account
// and certificates come from. No domain has this name: acme_domains are fully qualified.
const acmeDirectoryFile = "directory"

// cacheOf makes dir the cache of the ACME directory directory. autocert keys its cache
// by domain alone: once acme_directory changes (from Let's Encrypt's staging directory,
// after a trial, to production) it would go on serving the previous CA's certificate,
// which senders refuse, until its renewal months later. So the cache records its
// directory, and a cache of another one is set aside (moved, not deleted: a change back
// can have it restored by hand) before anything is asked of the new one. A cache that
// records none comes from a version that did not record it: it is taken as the
// configured directory's, unless that is Let's Encrypt's production directory and a
// certificate in it does not verify against the system's roots, as a staging one does
// not.
func cacheOf(dir, directory string, log *slog.Logger) error {
	marker := filepath.Join(dir, acmeDirectoryFile)
	b, err := readRecord(marker)
	var previous string
	switch {
	case err == nil:
		if previous = strings.TrimSpace(string(b)); previous == directory {
			return nil
		}
	case errors.Is(err, fs.ErrNotExist):
		if directory == defaultACMEDirectory {
			if name := untrustedCertificate(dir); name != "" {
				previous = "not recorded: the certificate of " + name + " does not verify against this system's roots"
			}
		}
	default:
		return fmt.Errorf("acme cache %s: %w", marker, err)
	}
	if previous != "" {
		aside, err := setAside(dir)
		if err != nil {
			return err
		}
		log.Warn("acme_directory is not the directory the acme cache's account and certificates come from: they are set aside, and certificates are asked of acme_directory",
			logDirectory, directory, logPrevious, previous, logSetAside, aside)
	}
	if err := writeRecord(dir, marker, directory+"\n"); err != nil {
		// Logged, not fatal, as a certificate that cannot be cached is (loggedCache): a
		// full disk must not stop HTTPS. The next start looks at the cache again.
		log.Error("could not record acme_directory in the acme cache: a later change of acme_directory may serve this CA's certificates until they are renewed",
			logCache, dir, logErr, fmt.Errorf("acme cache %s: %w", marker, err))
	}
	return nil
}

// maxRecord bounds what is read of the ACME cache's record of its directory: a
// directory's URL, which the log quotes when it is not acme_directory.
const maxRecord = 1024

// readRecord reads the ACME cache's record of its directory at path, which must be a
// file of its own. The cache is the service user's to write in: a link put there would
// have serve, run as root too, quote the file it names in the log and write over it.
func readRecord(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, errors.New("not a file but a symbolic link, which serve does not follow: remove it")
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a file but %s: remove it", storage.FileKind(fi.Mode()))
	}
	return io.ReadAll(io.LimitReader(f, maxRecord))
}

// writeRecord writes the record at path, in dir, through a new file renamed over it:
// a rename replaces a link put there meanwhile instead of writing through it.
func writeRecord(dir, path, content string) error {
	f, err := os.CreateTemp(dir, ".directory-*")
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// setAside moves the files of the ACME cache dir into a new directory within it, of
// mode 0700, and returns its path.
func setAside(dir string) (string, error) {
	aside, err := os.MkdirTemp(dir, "previous-"+time.Now().UTC().Format("20060102T150405Z")+"-")
	if err != nil {
		return "", fmt.Errorf("acme cache %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("acme cache %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
			return "", fmt.Errorf("acme cache %s: %w", dir, err)
		}
	}
	return aside, nil
}

// untrustedCertificate returns the name of a file of the ACME cache dir whose
// certificate chain does not verify against the system's roots, or "".
func untrustedCertificate(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var chain []*x509.Certificate
		for {
			var b *pem.Block
			if b, data = pem.Decode(data); b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				continue
			}
			if c, err := x509.ParseCertificate(b.Bytes); err == nil {
				chain = append(chain, c)
			}
		}
		if len(chain) == 0 {
			continue // the account key, a challenge's token
		}
		inter := x509.NewCertPool()
		for _, c := range chain[1:] {
			inter.AddCert(c)
		}
		// At a time of its validity: an expired certificate of the right CA is renewed,
		// not set aside.
		at := chain[0].NotBefore.Add(chain[0].NotAfter.Sub(chain[0].NotBefore) / 2)
		if _, err := chain[0].Verify(x509.VerifyOptions{Intermediates: inter, CurrentTime: at}); err != nil {
			return e.Name()
		}
	}
	return ""
}

// hostPolicy allows exactly domains. Unlike autocert.HostWhitelist it ignores a port in
// the name: an HTTP-01 request's Host carries one when the challenge reaches a port other
// than 80 (a port forward, or a test CA).
func hostPolicy(domains []string) autocert.HostPolicy {
	return func(_ context.Context, host string) error {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		name, err := idna.Lookup.ToASCII(strings.TrimSuffix(host, "."))
		if err != nil || !slices.Contains(domains, name) {
			return fmt.Errorf("host %q is not in acme_domains", host)
		}
		return nil
	}
}

// acmeCertificate is GetCertificate under ACME. A failure to obtain a certificate for a
// configured domain is logged, as the operator must see why HTTPS does not work;
// handshakes for other names (scanners, IP addresses) fail quietly. A domain it gets an
// ECDSA certificate for is watched for renewal (hold).
func (t *tlsSetup) acmeCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	domain := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	if !slices.Contains(t.domains, domain) || slices.Equal(hello.SupportedProtos, []string{acme.ALPNProto}) {
		// Another name, or the CA's validation, answered with its challenge.
		return t.acme.GetCertificate(hello)
	}
	cert, err := t.ordered(hello, domain)
	if err != nil && t.logFailureNow(domain, time.Now()) {
		t.log.Error("no certificate from the ACME CA", logDomain, hello.ServerName, logErr, err)
	}
	// A handshake that got one after obtain failed at start: watched from now on.
	if err == nil && cert.Leaf != nil && cert.Leaf.PublicKeyAlgorithm == x509.ECDSA {
		t.hold(domain)
	}
	return cert, err
}

// logFailureNow reports whether a failure for domain is to be logged at now: the first,
// and then one each acmeFailureLogEvery.
func (t *tlsSetup) logFailureNow(domain string, now time.Time) bool {
	return t.logEvery(domain, now, acmeFailureLogEvery)
}

// logEvery reports whether what key names is to be logged at now: the first time, and
// then once each every.
func (t *tlsSetup) logEvery(key string, now time.Time, every time.Duration) bool {
	t.failMu.Lock()
	defer t.failMu.Unlock()
	if last, ok := t.failLogged[key]; ok && now.Sub(last) < every {
		return false
	}
	if t.failLogged == nil {
		t.failLogged = map[string]time.Time{}
	}
	t.failLogged[key] = now
	return true
}

// noteFailure keeps err as the last failure met under ACME.
func (t *tlsSetup) noteFailure(err error) {
	t.lastFailure.Store(&timedError{at: time.Now(), err: err})
}

// noteErrors is the ACME client's transport, keeping each request's failure to reach
// the CA (refused, timed out, a name that does not resolve): a renewal that fails in
// autocert's background leaves no other trace.
type noteErrors struct {
	next http.RoundTripper
	note func(error)
}

func (n noteErrors) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(r)
	if err != nil {
		n.note(fmt.Errorf("ACME CA %s: %w", r.URL.Host, err))
	}
	return resp, err
}

// loggedCache is autocert's cache directory, with each failure to write it logged:
// autocert drops the error when it stores a certificate it has just obtained (the next
// start then orders another, against the CA's limits), and a renewal it cannot store is
// thrown away and ordered again half an hour later, until the certificate expires.
type loggedCache struct {
	autocert.DirCache
	dir string
	t   *tlsSetup
}

func (c loggedCache) Put(ctx context.Context, key string, data []byte) error {
	err := c.DirCache.Put(ctx, key, data)
	if err != nil {
		err = fmt.Errorf("acme cache %s: %w", filepath.Join(c.dir, key), err)
		c.t.noteFailure(err)
		if c.t.logFailureNow("cache "+key, time.Now()) {
			c.t.log.Error("could not keep a certificate in the ACME cache: it serves until serve stops, then the CA is asked again (the CA limits how often it issues), and a renewal is thrown away",
				logCache, c.dir, logErr, err)
		}
	}
	return err
}

// Reload reads the certificate files again now (serve calls it on SIGHUP). When they
// cannot be loaded the previous certificate stays in use and the error says why. Under
// ACME there is nothing to reload: autocert renews on its own, and Reload returns nil.
func (t *tlsSetup) Reload() error {
	if t.files == nil {
		return nil
	}
	return t.files.reload()
}

// OrderAgain, under ACME (serve calls it on SIGHUP), orders again the certificates of
// the domains that have none, whose orders failed and were put off (gate): the operator
// has put right what failed them. Each is ordered at once, or a minute after its last
// failure, which autocert answers from memory until then, unless ctx has ended by then:
// serve has stopped, and with its listeners closed the CA could not validate the order,
// which would count as one more failure against the name. It returns those domains.
func (t *tlsSetup) OrderAgain(ctx context.Context) []string {
	if t.files != nil {
		return nil
	}
	after := t.gate.reset()
	var ordering []string
	t.heldMu.Lock()
	for _, d := range t.domains {
		if !t.held[d] {
			ordering = append(ordering, d)
		}
	}
	t.heldMu.Unlock()
	for _, d := range ordering {
		go func() {
			if wait := time.Until(after[d]); wait > 0 {
				timer := time.NewTimer(wait)
				defer timer.Stop()
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
			if ctx.Err() == nil {
				t.obtain(d)
			}
		}()
	}
	return ordering
}

// Run keeps HTTPS current until ctx ends. With files it reloads them when they change,
// and logs a certificate that has expired or is overdue for replacement (checkFiles).
// Under ACME it obtains each domain's certificate at once (from the cache, or from the CA
// through the listeners, which must already be serving), so that the first webhook does
// not wait for issuance and a failure shows in the log at start, and then logs each
// renewal that is overdue (checkRenewal); it returns when ctx ends without waiting for
// an issuance in flight, which autocert bounds itself.
func (t *tlsSetup) Run(ctx context.Context) {
	every, check := t.poll, func(now time.Time) {
		t.files.reloadIfChanged()
		t.checkFiles(now)
	}
	if t.files == nil {
		for _, d := range t.domains {
			go t.obtain(d)
		}
		every, check = t.watch, func(now time.Time) {
			for _, d := range t.domains {
				t.checkRenewal(d, now)
			}
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			check(now)
		}
	}
}

// renewalDue is when a certificate renewed on autocert's schedule (without RenewBefore;
// certbot's is alike) has been replaced: renewal starts a third of its lifetime before
// expiry (30 days at most), later by a jitter of up to a tenth of that (an hour at
// most), and is given as long again to go through.
func renewalDue(leaf *x509.Certificate) time.Time {
	threshold := min(leaf.NotAfter.Sub(leaf.NotBefore)/3, 30*24*time.Hour)
	jitter := min(threshold/10, time.Hour)
	return leaf.NotAfter.Add(-threshold + 2*jitter)
}

// filesReplacedEvery bounds how often a certificate file not replaced when due is
// warned of: someone else's tool renews it, perhaps by hand, for weeks ahead.
const filesReplacedEvery = 24 * time.Hour

// checkFiles logs the certificate from files when it has expired (an error, at most once
// a minute) or has not been replaced by the time a renewal on schedule would have (a
// warning, at most once a day): load warns of an expired one only when it reads it, and
// one that expires while serve runs would otherwise go unsaid.
func (t *tlsSetup) checkFiles(now time.Time) {
	leaf := t.files.cur.Load().Leaf
	attrs := []any{logCert, t.files.certPath, logNotAfter, leaf.NotAfter.UTC().Format(time.RFC3339)}
	switch {
	case now.After(leaf.NotAfter):
		if t.logFailureNow("expired "+t.files.certPath, now) {
			t.log.Error("the certificate from tls_cert_file has expired: every client refuses it; put a renewed pair in place", attrs...)
		}
	case !now.Before(renewalDue(leaf)):
		if t.logEvery("overdue "+t.files.certPath, now, filesReplacedEvery) {
			t.log.Warn("the certificate from tls_cert_file expires soon and has not been replaced: check the tool that renews it", attrs...)
		}
	}
}

// ecdsaHello is a ClientHello for domain from an ECDSA-capable client.
func ecdsaHello(domain string) *tls.ClientHelloInfo {
	return &tls.ClientHelloInfo{
		ServerName:       domain,
		CipherSuites:     []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
		SupportedCurves:  []tls.CurveID{tls.CurveP256},
	}
}

// checkRenewal logs domain's certificate when autocert has not renewed it by the time it
// should have: a warning until it expires, then an error, each at most once a minute.
// autocert renews in the background and keeps a failure to itself, and once the
// certificate has expired it goes on handing it out, so that every client refuses the
// handshake and nothing else reaches the log above debug.
func (t *tlsSetup) checkRenewal(domain string, now time.Time) {
	t.heldMu.Lock()
	held := t.held[domain]
	t.heldMu.Unlock()
	if !held {
		return // obtain or a handshake logs why there is none
	}
	cert, err := t.acme.GetCertificate(ecdsaHello(domain))
	if err != nil || cert.Leaf == nil {
		return
	}
	leaf := cert.Leaf
	if now.Before(renewalDue(leaf)) {
		return
	}
	attrs := []any{logDomain, domain, logNotAfter, leaf.NotAfter.UTC().Format(time.RFC3339)}
	if f := t.lastFailure.Load(); f != nil {
		attrs = append(attrs, logErr, f.err, logErrAt, f.at.UTC().Format(time.RFC3339))
	}
	if now.After(leaf.NotAfter) {
		if t.logFailureNow("expired "+domain, now) {
			t.log.Error("the ACME certificate has expired and was not renewed: every client refuses it; check that the CA can be reached and can reach this server on port 80 or 443, and that the acme cache can be written", attrs...)
		}
		return
	}
	if t.logFailureNow("overdue "+domain, now) {
		t.log.Warn("the ACME certificate was not renewed when due: autocert tries again every 30 to 60 minutes; check that the CA can be reached and can reach this server on port 80 or 443, and that the acme cache can be written", attrs...)
	}
}

// hold records that autocert holds an ECDSA certificate for domain, which checkRenewal
// may then ask for without ordering one.
func (t *tlsSetup) hold(domain string) {
	t.heldMu.Lock()
	defer t.heldMu.Unlock()
	if t.held == nil {
		t.held = map[string]bool{}
	}
	t.held[domain] = true
}

// ordered is autocert's certificate for hello, a handshake for domain, one of
// acme_domains. A domain without one in autocert's memory is ordered one, unless its
// orders are put off (gate): then the handshake fails with the gate's error, and the
// CA is not asked.
func (t *tlsSetup) ordered(hello *tls.ClientHelloInfo, domain string) (*tls.Certificate, error) {
	t.heldMu.Lock()
	held := t.held[domain]
	t.heldMu.Unlock()
	if !held {
		if err := t.gate.wait(domain, time.Now()); err != nil {
			return nil, err
		}
	}
	cert, err := t.acme.GetCertificate(hello)
	t.gate.done(domain, time.Now(), err)
	return cert, err
}

// obtain gets domain's certificate as an ECDSA-capable client would, and logs the outcome.
func (t *tlsSetup) obtain(domain string) {
	cert, err := t.ordered(ecdsaHello(domain), domain)
	if err != nil {
		// As a handshake's failure is: SIGHUPs in a row each obtain again.
		if t.logFailureNow(domain, time.Now()) {
			t.log.Error("no certificate from the ACME CA", logDomain, domain, logErr, err)
		}
		return
	}
	t.hold(domain)
	attrs := []any{logDomain, domain}
	if cert.Leaf != nil {
		attrs = append(attrs, logNotAfter, cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	t.log.Info("certificate ready", attrs...)
}

// certFiles is a certificate and key read from files, swapped whole when they change.
type certFiles struct {
	certPath, keyPath string
	log               *slog.Logger

	cur atomic.Pointer[tls.Certificate]

	mu   sync.Mutex // one reload at a time (poll and SIGHUP)
	seen fileStamps // the files as they were at the last load attempt
	// failed says the last attempt failed: the poll tries again though the stamps stay
	// the same, as a fix of the files' mode or owner (chmod, chown) changes none of them.
	failed bool
}

// fileStamps identify the two files' contents cheaply: replaced (a new inode, as a
// certificate tool's rename or symlink swap gives), rewritten (mtime) or resized.
type fileStamps struct {
	cert, key os.FileInfo
}

func stampOf(path string) os.FileInfo {
	fi, err := os.Stat(path) // follows symlinks: certbot's live/ names point into archive/
	if err != nil {
		return nil
	}
	return fi
}

func sameStamp(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

func (f *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.cur.Load(), nil
}

// reloadIfChanged reloads when either file differs from the last attempt, or when that
// attempt failed. A failure is logged once per change of the files, not at every poll.
func (f *certFiles) reloadIfChanged() {
	now := fileStamps{cert: stampOf(f.certPath), key: stampOf(f.keyPath)}
	f.mu.Lock()
	changed := !sameStamp(now.cert, f.seen.cert) || !sameStamp(now.key, f.seen.key)
	retry := f.failed
	f.mu.Unlock()
	if changed || retry {
		f.load(changed) // logs its outcome
	}
}

// reload loads the pair; on failure the previous pair stays and the error is logged
// (once one is serving) and returned.
func (f *certFiles) reload() error {
	return f.load(true)
}

// load is reload, logging a failure only when logFailure is set: a retry of files that
// have not changed fails, as a rule, for the reason already logged.
func (f *certFiles) load(logFailure bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Stamped before reading: a write that lands during the read changes the stamp, so
	// the next poll reads again.
	f.seen = fileStamps{cert: stampOf(f.certPath), key: stampOf(f.keyPath)}
	cert, err := loadKeyPair(f.certPath, f.keyPath)
	old := f.cur.Load()
	if err == nil && old != nil {
		err = notWorse(f.certPath, cert.Leaf, old.Leaf, time.Now())
	}
	f.failed = err != nil
	if err != nil {
		if old != nil && logFailure {
			f.log.Error("certificate files not reloaded: still serving the previous certificate; they are read again at each check until they load", logErr, err)
		}
		return err
	}
	f.cur.Store(cert)
	leaf := cert.Leaf
	attrs := []any{logCert, f.certPath, logNames, strings.Join(certNames(leaf), ","), logNotAfter, leaf.NotAfter.UTC().Format(time.RFC3339)}
	if old == nil {
		f.log.Info("certificate loaded", attrs...)
	} else {
		f.log.Info("certificate reloaded", attrs...)
	}
	if time.Now().After(leaf.NotAfter) {
		f.log.Warn("the certificate has expired: clients will refuse it", attrs...)
	}
	// Others' read bit alone: a group's (0640, root:hookdedup) is how a deploy hook lets
	// the service's user read a key that root owns.
	if fi, err := os.Stat(f.keyPath); err == nil && fi.Mode().Perm()&0o004 != 0 {
		f.log.Warn(fmt.Sprintf("tls_key_file %s (%#o) can be read by every user of this machine, and any of them could pass for this server to the senders: make it private with chmod 600, or chmod 640 and a group the service's user is in",
			f.keyPath, uint32(fi.Mode().Perm())))
	}
	if err := unchained(cert); err != nil {
		f.log.Warn("tls_cert_file holds the certificate alone, without the chain that issued it, and it does not verify against this system's roots: "+
			"senders refuse it (they do not fetch a missing intermediate); use the full chain (certbot's fullchain.pem), or, for your own CA, have the senders trust it",
			append(attrs, logErr, err)...)
	}
	return nil
}

// notWorse returns why leaf, read from certPath, is not to replace cur, the certificate
// in use: leaf has expired or is not valid yet while cur is valid. A deploy hook that
// copies an old pair, or a clock that is behind the CA's, would otherwise swap a
// certificate every sender accepts for one every sender refuses. Kept as failed, the
// files are read again at each check, so that a pair put right, or one that comes into
// its validity, is loaded then. Over a certificate that is itself out of its validity,
// any pair that loads is taken: nothing better is in hand.
func notWorse(certPath string, leaf, cur *x509.Certificate, now time.Time) error {
	if now.Before(cur.NotBefore) || now.After(cur.NotAfter) {
		return nil
	}
	switch {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("tls_cert_file %s: the certificate expired at %s, and the one in use is valid until %s",
			certPath, leaf.NotAfter.UTC().Format(time.RFC3339), cur.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("tls_cert_file %s: the certificate is not valid before %s (is this machine's clock right?), and the one in use is valid until %s",
			certPath, leaf.NotBefore.UTC().Format(time.RFC3339), cur.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// unchained returns why cert, a leaf alone that its issuer did not sign itself, does not
// verify against the system's roots; nil when it does, when a chain follows it (whose
// root the senders may be told to trust), or when it is self-signed (and so deliberately
// trusted by name). Webhook senders, unlike browsers, do not fetch a missing
// intermediate, and their refusals reach the log at debug only.
func unchained(cert *tls.Certificate) error {
	leaf := cert.Leaf
	if len(cert.Certificate) > 1 {
		return nil
	}
	if bytes.Equal(leaf.RawIssuer, leaf.RawSubject) && leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature) == nil {
		return nil
	}
	_, err := leaf.Verify(x509.VerifyOptions{})
	return err
}

// loadKeyPair reads and matches the pair; its errors name the file at fault.
func loadKeyPair(certPath, keyPath string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("tls_cert_file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("tls_key_file: %w", err)
	}
	if !hasPEM(certPEM, func(typ string) bool { return typ == "CERTIFICATE" }) {
		return nil, fmt.Errorf("tls_cert_file %s: no PEM certificate in it", certPath)
	}
	if !hasPEM(keyPEM, func(typ string) bool { return strings.HasSuffix(typ, "PRIVATE KEY") }) {
		return nil, fmt.Errorf("tls_key_file %s: no PEM private key in it", keyPath)
	}
	if err := keyProblem(keyPEM); err != nil {
		return nil, fmt.Errorf("tls_key_file %s: %w", keyPath, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		if n := keysCertificate(certPEM, keyPEM); n > 1 {
			return nil, fmt.Errorf("tls_cert_file %s: the certificate of the key in tls_key_file %s is the %s in the file, not the first: put it first, then the chain that issued it (certbot's fullchain.pem is in that order)",
				certPath, keyPath, ordinal(n))
		}
		return nil, fmt.Errorf("tls_key_file %s does not go with the certificate in tls_cert_file %s: %w", keyPath, certPath, err)
	}
	if cert.Leaf == nil { // X509KeyPair fills it unless GODEBUG says otherwise
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls_cert_file %s: %w", certPath, err)
		}
	}
	return &cert, nil
}

// keyProblem says why the private key that tls.X509KeyPair would take from keyPEM (the
// first PEM block of a private key) cannot be read, or nil when it can: an X509KeyPair
// error does not tell such a key from one that belongs to another certificate, and
// an encrypted key is the usual cause, for which the fix is another form of the same key.
func keyProblem(keyPEM []byte) error {
	for {
		var b *pem.Block
		if b, keyPEM = pem.Decode(keyPEM); b == nil {
			return nil // hasPEM has said there is none
		}
		if b.Type != "PRIVATE KEY" && !strings.HasSuffix(b.Type, " PRIVATE KEY") {
			continue
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return errors.New("the private key is encrypted, and serve has no passphrase to open it: write it without one (openssl pkey -in KEY -out KEY.plain, then chmod 600 KEY.plain)")
		}
		if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
			return nil
		}
		if _, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
			return nil
		}
		if _, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
			return nil
		}
		return fmt.Errorf("the private key (PEM %q) cannot be read: it is damaged, or of a form other than PKCS #8, PKCS #1 or SEC 1", b.Type)
	}
}

// keysCertificate returns the place (1 for the first) of the certificate in certPEM
// that keyPEM's key belongs to, or 0 when none is. tls.X509KeyPair matches the key
// with the first certificate alone: a chain written before its leaf fails there as a
// key of another certificate would.
func keysCertificate(certPEM, keyPEM []byte) int {
	n := 0
	for {
		var b *pem.Block
		if b, certPEM = pem.Decode(certPEM); b == nil {
			return 0
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		n++
		if _, err := tls.X509KeyPair(pem.EncodeToMemory(b), keyPEM); err == nil {
			return n
		}
	}
}

// ordinal is n in words up to the tenth, which no chain exceeds, else as "n-th".
func ordinal(n int) string {
	words := []string{"first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"}
	if n >= 1 && n <= len(words) {
		return words[n-1]
	}
	return fmt.Sprintf("%d-th", n)
}

func hasPEM(data []byte, want func(typ string) bool) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if want(b.Type) {
			return true
		}
	}
}

// certNames are the names a certificate is good for.
func certNames(c *x509.Certificate) []string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return names
}

// redirectToHTTPS is the plain-HTTP listener's answer to anything but an ACME challenge.
// GET and HEAD (a browser opening the console) are sent to the same URL over https with
// 302, a redirect no browser remembers once HTTPS is turned off again. Any other method
// gets a JSON 400 naming the https URL: a webhook sender rarely follows a redirect with
// its body, and one that did would hide that its deliveries cross the internet in clear
// text; a refusal shows up in the sender's delivery log, where the URL gets fixed. Only
// a host the certificate is for (served reports whether it is) is redirected to: any
// other Host would make this an open redirect for whatever sits between the client and
// this listener (a shared cache, a proxy that routes by address).
func redirectToHTTPS(httpsPort string, served func(host string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1] // an IPv6 literal without a port
		}
		if host == "" {
			writeJSONError(w, http.StatusBadRequest, "this address serves only HTTPS, and the request names no host")
			return
		}
		if !served(host) {
			writeJSONError(w, http.StatusBadRequest, "this address serves only HTTPS, for the names of its certificate, and the request names another host")
			return
		}
		switch {
		case httpsPort != "443":
			host = net.JoinHostPort(host, httpsPort)
		case strings.Contains(host, ":"):
			host = "[" + host + "]"
		}
		// The target is the request's path and query, never its request-target as
		// sent: an absolute-form target with an opaque part ("x:@evil.example/")
		// keeps the certified Host yet would make the Location's host evil.example.
		path := r.URL.EscapedPath()
		if r.URL.Opaque != "" || !strings.HasPrefix(path, "/") {
			writeJSONError(w, http.StatusBadRequest, "this address serves only HTTPS, and the request's target is not a path")
			return
		}
		target := "https://" + host + path
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.Redirect(w, r, target, http.StatusFound)
			return
		}
		writeJSONError(w, http.StatusBadRequest, "this address serves only HTTPS: send the request to "+target)
	})
}
