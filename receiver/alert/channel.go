package alert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
	"github.com/hookdedup/hookdedup/storage"
)

// The types of channel, as the config's `type` names them.
const (
	TypeWebhook = "webhook" // a JSON POST signed with Standard Webhooks
	TypeSlack   = "slack"   // an incoming webhook taking {"text": ...} (Slack, Mattermost, Rocket.Chat)
	TypeEmail   = "email"   // a message over SMTP, with STARTTLS and AUTH PLAIN
)

// Types lists the types of channel, for messages and docs.
var Types = []string{TypeWebhook, TypeSlack, TypeEmail}

// Defaults of a channel's settings.
const (
	DefaultChannelTimeout = 10 * time.Second
	DefaultMaxAttempts    = 10
	DefaultMaxBackoff     = 10 * time.Minute
)

// MaxChannelTimeout bounds a channel's timeout from above (exclusive): a send that may
// take longer would outlast its lease, and another replica would send it again.
const MaxChannelTimeout = 4 * time.Minute

// Bounds of a channel's other settings, so that a slip ("1ms" for "1m", a zero too many)
// is refused at start rather than break the channel in silence.
const (
	// MinChannelTimeout: a shorter send cannot connect and be answered (TLS, SMTP's
	// exchange), so that every notification would fail.
	MinChannelTimeout = time.Second
	// MinMaxBackoff and MaxMaxBackoff bound max_backoff: below, the retries come at
	// once, one after the other; above, a notification waits past when it matters.
	MinMaxBackoff = time.Second
	MaxMaxBackoff = time.Hour
	// MaxMaxAttempts bounds max_attempts: a channel's notifications go in order, so one
	// retried for days holds up every later one.
	MaxMaxAttempts = 100
)

// ChannelConfig is one [[alert_channel]] table, its secrets read.
type ChannelConfig struct {
	Name string
	Type string
	// URL is where webhook and slack POST. A slack URL holds its credential, so it is
	// a secret: shown masked, never logged.
	URL string
	// Secrets: webhook, the whsec_ signing secret(s), the first of which signs;
	// slack, its URL when URL is unset; email, the SMTP password.
	Secrets []string
	// Email: the SMTP server (host:port, STARTTLS required), the user for AUTH PLAIN
	// (none: no AUTH), the sender and recipients.
	SMTPAddr string
	Username string
	From     string
	To       []string
	// CAFile is a PEM file of the CA certificates the channel trusts instead of the
	// system's (a server under a private CA).
	CAFile string
	// Timeout bounds one attempt; MaxAttempts and MaxBackoff bound the retries, which
	// wait 1 s, 2 s, 4 s … (±20 % jitter) up to MaxBackoff.
	Timeout     time.Duration
	MaxAttempts int
	MaxBackoff  time.Duration
}

// Channel sends the notifications of alerts to one place.
type Channel struct {
	name, typ   string
	target      string // where it sends, masked: for the page and the log
	timeout     time.Duration
	maxAttempts int
	maxBackoff  time.Duration
	caFile      string // for the error of a certificate none of its CAs issued
	send        func(ctx context.Context, m Message) error
}

// Name is the channel's name, as rules name it.
func (c *Channel) Name() string { return c.name }

// Type is webhook, slack or email.
func (c *Channel) Type() string { return c.typ }

// Target says where the channel sends, without its secrets: a webhook's URL without
// query, credentials or path segments that may be tokens, a slack URL's host only, an email's server and recipients.
func (c *Channel) Target() string { return c.target }

// Send sends one message, within the channel's timeout. Its errors never hold a
// secret or a slack URL.
func (c *Channel) Send(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.send(ctx, m)
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		// x509's own words ("certificate signed by unknown authority") name neither the
		// channel nor the setting that would make it trusted.
		if c.caFile == "" {
			return fmt.Errorf("%w: the server's certificate is not trusted by this system's CAs: "+
				"if a private CA issued it, give channel %q that CA's PEM as ca_file", err, c.name)
		}
		return fmt.Errorf("%w: the server's certificate is not trusted: no CA in channel %q's ca_file %s issued it",
			err, c.name, c.caFile)
	}
	return err
}

// NewChannel checks cfg and builds its channel, which posts through client (nil: one
// that follows no redirect and trusts the CAs of cfg.CAFile, or the system's; a client
// given cannot be told cfg.CAFile, which is then refused). Errors name the setting at
// fault and never quote a secret.
func NewChannel(cfg ChannelConfig, client *http.Client) (*Channel, error) {
	if err := checkName(cfg.Name); err != nil {
		return nil, err
	}
	if cfg.Timeout < 0 || cfg.MaxAttempts < 0 || cfg.MaxBackoff < 0 {
		return nil, errors.New("timeout, max_attempts and max_backoff must not be negative")
	}
	if cfg.Timeout >= MaxChannelTimeout {
		return nil, fmt.Errorf("timeout: %s is not below %s, how long a notification being sent is kept "+
			"from other senders: another replica would send it again", cfg.Timeout, MaxChannelTimeout)
	}
	switch {
	case cfg.Timeout != 0 && cfg.Timeout < MinChannelTimeout:
		return nil, fmt.Errorf("timeout: %s is shorter than %s: no send could be answered within it", cfg.Timeout, MinChannelTimeout)
	case cfg.MaxBackoff != 0 && cfg.MaxBackoff < MinMaxBackoff:
		return nil, fmt.Errorf("max_backoff: %s is shorter than %s", cfg.MaxBackoff, MinMaxBackoff)
	case cfg.MaxBackoff > MaxMaxBackoff:
		return nil, fmt.Errorf("max_backoff: %s is longer than %s", cfg.MaxBackoff, MaxMaxBackoff)
	case cfg.MaxAttempts > MaxMaxAttempts:
		return nil, fmt.Errorf("max_attempts: %d is more than %d", cfg.MaxAttempts, MaxMaxAttempts)
	}
	c := &Channel{name: cfg.Name, typ: cfg.Type, timeout: cfg.Timeout, maxAttempts: cfg.MaxAttempts, maxBackoff: cfg.MaxBackoff,
		caFile: cfg.CAFile}
	if c.timeout == 0 {
		c.timeout = DefaultChannelTimeout
	}
	if c.maxAttempts == 0 {
		c.maxAttempts = DefaultMaxAttempts
	}
	if c.maxBackoff == 0 {
		c.maxBackoff = DefaultMaxBackoff
	}
	emailOnly := cfg.SMTPAddr != "" || cfg.Username != "" || cfg.From != "" || len(cfg.To) > 0
	switch cfg.Type {
	case TypeWebhook:
		if emailOnly {
			return nil, errors.New("smtp_addr, username, from and to are for type email only")
		}
		u, err := httpURL("url", cfg.URL)
		if err != nil {
			return nil, err
		}
		if client, err = httpClient(client, cfg.CAFile, u); err != nil {
			return nil, err
		}
		if len(cfg.Secrets) == 0 {
			return nil, errors.New("secret: a webhook channel signs what it sends: give secret or secret_env (whsec_ and base64, as Standard Webhooks)")
		}
		signer, err := signature.New(signature.Config{Scheme: "standard-webhooks", Secrets: cfg.Secrets})
		if err != nil {
			return nil, fmt.Errorf("secret: %w", err)
		}
		c.target = maskURL(u, false)
		c.send = func(ctx context.Context, m Message) error { return postWebhook(ctx, client, cfg.URL, signer, m) }
	case TypeSlack:
		if emailOnly {
			return nil, errors.New("smtp_addr, username, from and to are for type email only")
		}
		raw := cfg.URL
		switch {
		case raw != "" && len(cfg.Secrets) > 0:
			return nil, errors.New("url: give the incoming webhook's URL once, as url or as secret/secret_env")
		case raw == "" && len(cfg.Secrets) > 1:
			return nil, errors.New("secret: a slack channel takes one URL")
		case raw == "" && len(cfg.Secrets) == 1:
			raw = cfg.Secrets[0]
		}
		u, err := httpURL("url", raw)
		if err != nil {
			// Never quote it: it holds the credential.
			return nil, errors.New("url: the incoming webhook's URL is not an http(s) URL")
		}
		if client, err = httpClient(client, cfg.CAFile, u); err != nil {
			return nil, err
		}
		c.target = maskURL(u, true)
		c.send = func(ctx context.Context, m Message) error { return postSlack(ctx, client, raw, m) }
	case TypeEmail:
		if cfg.URL != "" {
			return nil, errors.New("url: is for types webhook and slack; an email channel takes smtp_addr")
		}
		e, err := newEmail(cfg)
		if err != nil {
			return nil, err
		}
		c.target = fmt.Sprintf("%s via %s", strings.Join(cfg.To, ", "), cfg.SMTPAddr)
		c.send = e.send
	case "":
		return nil, fmt.Errorf("type: is required (one of %s)", strings.Join(Types, ", "))
	default:
		return nil, fmt.Errorf("type: %q is not a type of channel (want one of %s)", cfg.Type, strings.Join(Types, ", "))
	}
	return c, nil
}

// httpClient is the client a webhook or slack channel posts to u through: given, or
// one of its own that trusts the CAs of caFile alone ("": the system's).
func httpClient(given *http.Client, caFile string, u *url.URL) (*http.Client, error) {
	switch {
	case caFile == "" && given != nil:
		return given, nil
	case caFile != "" && u.Scheme != "https":
		// The url is not quoted: a slack URL holds its credential.
		return nil, errors.New("ca_file: the url is http://, where no TLS is spoken, so ca_file would have no effect: " +
			"give the https:// url of the server, or remove ca_file")
	case caFile != "" && given != nil:
		return nil, errors.New("ca_file: is for a channel that makes its own client")
	}
	// A redirect is an answer that is not 2xx, so a failure: followed, a POST would
	// turn into a GET of another address.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if caFile == "" {
		return client, nil
	}
	roots, err := readCAFile(caFile)
	if err != nil {
		return nil, err
	}
	// A clone of the default transport keeps all that the system's CAs are used with:
	// the proxy from the environment, the dial and handshake timeouts, HTTP/2.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: roots}
	client.Transport = t
	return client, nil
}

// httpURL parses raw, the http(s) URL that setting holds. Its errors quote none of raw,
// not even a part of it: url.Parse's quotes it whole; one without "//"
// ("https:user:secret@host/x") keeps its password in the opaque part that a URL
// without credentials or query would still show; "user:secret@host/x" has the user
// name for its scheme; and a slack URL's path is its credential.
func httpURL(setting, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("%s: is required", setting)
	}
	if why := URLProblem(raw, false); why != "" {
		return nil, fmt.Errorf("%s: is not an http(s) URL: %s (write it like https://host/path)", setting, why)
	}
	return url.Parse(raw)
}

// URLProblem says why raw, a URL setting's value (a channel's url, forward_url,
// acme_directory), is not an http(s) URL that a connection can be made to (https only,
// with httpsOnly), and "" when it is one. It quotes none of raw, not even its scheme:
// the setting may carry credentials in a shape that url.Parse reads otherwise than
// meant ("https:user:secret@host/x", without "//", has no host and keeps the password
// in its opaque part; "user:secret@host/x" has the user name for its scheme), and a
// configuration error goes to stderr and the journal.
func URLProblem(raw string, httpsOnly bool) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "it does not parse as a URL"
	case u.Scheme == "":
		return "it has no scheme"
	case httpsOnly && u.Scheme != "https":
		return "its scheme is not https"
	case u.Scheme != "http" && u.Scheme != "https":
		return "its scheme is not http or https"
	case u.Opaque != "":
		return `"//" is missing after "` + u.Scheme + `:"`
	case u.Host == "":
		return "it has no host"
	case u.Port() != "":
		if err := dialPort(u.Port()); err != nil {
			return err.Error()
		}
	}
	return ""
}

// dialPort refuses a port that no connection can be made to, as dialling reads it: a
// number from 1 to 65535 or a service name this system knows. Taken at start, such a
// port would fail every attempt of the first alert.
func dialPort(port string) error {
	if strings.Trim(port, "0123456789") == "" {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("port %s is out of range: a port is a number from 1 to 65535", port)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q is neither a number from 1 to 65535 nor a service name this system knows", port)
	}
	return nil
}

// implicitTLSPort reports whether port is 465, submissions (RFC 8314).
func implicitTLSPort(port string) bool {
	n, err := net.LookupPort("tcp", port)
	return err == nil && n == 465
}

// maskURL shows u without credentials, query, and path segments that may be tokens
// (storage.RedactPath), as the console shows a forward_url; hostOnly shows its host
// alone (a slack URL's path is its credential).
func maskURL(u *url.URL, hostOnly bool) string {
	if hostOnly {
		return u.Scheme + "://" + u.Host + "/…"
	}
	v := *u
	v.User, v.RawQuery, v.Fragment = nil, "", ""
	storage.RedactPath(&v)
	return v.String()
}

// Message is one notification as the channels send it.
type Message struct {
	// ID is the notification's own id, the same on every retry: a webhook's
	// webhook-id, so that the receiving end can drop a retry it already has.
	ID      string
	Event   string // storage.AlertOpened or storage.AlertResolvedEvent
	Actor   string // who resolved it by hand; "" when it resolved by itself; or storage.ResolvedRuleRemoved
	At      time.Time
	Summary string // the alert's at the transition
	Value   string
	Alert   storage.Alert
	// ConsoleURL, if set, is where the alerts page is.
	ConsoleURL string
}

// Title is the message in one line: what happened, to which rule and subject.
func (m Message) Title() string {
	what := m.Alert.Rule
	if m.Alert.Subject != "" {
		what += " on " + m.Alert.Subject
	}
	switch m.Event {
	case storage.AlertOpened:
		return "hookdedup alert opened: " + what
	default:
		switch m.Actor {
		case "":
			return "hookdedup alert resolved by itself (the condition cleared): " + what
		case storage.ResolvedRuleRemoved:
			return "hookdedup alert resolved (its rule was removed from the configuration): " + what
		}
		return "hookdedup alert resolved by " + m.Actor + ": " + what
	}
}

// Text is the message in a few lines of plain text.
func (m Message) Text() string {
	var b strings.Builder
	b.WriteString(m.Title())
	b.WriteString("\n")
	if m.Event == storage.AlertOpened {
		b.WriteString(m.Summary)
	} else {
		b.WriteString("Was: " + m.Summary)
	}
	fmt.Fprintf(&b, "\nAlert %d (%s), opened %s", m.Alert.ID, m.Alert.Kind, m.Alert.OpenedAt.UTC().Format(time.RFC3339))
	if m.ConsoleURL != "" {
		b.WriteString("\n" + m.ConsoleURL)
	}
	return b.String()
}

// webhookPayload is the JSON body of a webhook channel's POST, shaped as Standard
// Webhooks recommends: a type, a timestamp, and the data.
type webhookPayload struct {
	Type      string      `json:"type"` // alert.opened | alert.resolved
	Timestamp time.Time   `json:"timestamp"`
	Data      webhookData `json:"data"`
}

type webhookData struct {
	ID         int64      `json:"id"`
	Rule       string     `json:"rule"`
	Kind       string     `json:"kind"`
	Subject    string     `json:"subject,omitempty"`
	Summary    string     `json:"summary"`
	Value      string     `json:"value"`
	Text       string     `json:"text"`
	OpenedAt   time.Time  `json:"opened_at"`
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy string     `json:"resolved_by,omitempty"` // the user; absent when it resolved by itself
	// RuleRemoved: resolved because its rule is no longer configured.
	RuleRemoved bool   `json:"rule_removed,omitempty"`
	URL         string `json:"url,omitempty"`
}

func postWebhook(ctx context.Context, client *http.Client, target string, signer signature.Verifier, m Message) error {
	d := webhookData{ID: m.Alert.ID, Rule: m.Alert.Rule, Kind: m.Alert.Kind, Subject: m.Alert.Subject,
		Summary: m.Summary, Value: m.Value, Text: m.Text(), OpenedAt: m.Alert.OpenedAt.UTC(), URL: m.ConsoleURL}
	if m.Event == storage.AlertResolvedEvent {
		at := m.At.UTC()
		d.ResolvedAt = &at
		if m.Actor == storage.ResolvedRuleRemoved {
			d.RuleRemoved = true
		} else {
			d.ResolvedBy = m.Actor
		}
	}
	body, err := json.Marshal(webhookPayload{Type: "alert." + m.Event, Timestamp: m.At.UTC(), Data: d})
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Webhook-Id", m.ID)
	if err := signer.Sign(h, nil, body, time.Now()); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	h.Set("Content-Type", "application/json")
	return post(ctx, client, target, h, body)
}

// slackEscaper escapes what Slack's mrkdwn (and Mattermost's) reads as markup: the text
// comes from the configuration and from deliveries (a rule's name, a source's, a
// summary), and a source named <!channel> would otherwise notify everyone in the channel,
// or <https://…|text> show a link that says something else. Slack asks for these three
// alone, and shows them back as written.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func postSlack(ctx context.Context, client *http.Client, target string, m Message) error {
	body, err := json.Marshal(struct {
		Text string `json:"text"`
	}{slackEscaper.Replace(m.Text())})
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return post(ctx, client, target, h, body)
}

// post sends body to target. Any 2xx is success. Its errors never hold the URL, which
// net/http puts in its own (a slack URL holds its credential).
func post(ctx context.Context, client *http.Client, target string, h http.Header, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return errors.New("cannot make a request of the URL")
	}
	req.Header = h
	req.Header.Set("User-Agent", "hookdedup-alerts")
	resp, err := client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		// Where it points is not quoted: it may hold a token, as the URL may.
		return fmt.Errorf("POST: HTTP %d, a redirect, which a channel does not follow: give the channel the address it points to",
			resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fmt.Errorf("POST: HTTP %d", resp.StatusCode)
	}
	return nil
}

// email sends over SMTP: STARTTLS always (the password and the alerts never cross the
// network in clear), then AUTH PLAIN when a user is set.
type email struct {
	addr, host     string
	user, password string
	from           string   // the address, for MAIL FROM
	to             []string // the addresses, for RCPT TO
	// The header fields, as configured, a display name that is not plain ASCII
	// encoded (RFC 2047): a server that does not offer SMTPUTF8 takes only ASCII.
	fromHeader, toHeader string
	roots                *x509.CertPool // nil: the system's
}

func newEmail(cfg ChannelConfig) (*email, error) {
	host, port, err := net.SplitHostPort(cfg.SMTPAddr)
	switch {
	case cfg.SMTPAddr == "":
		return nil, errors.New("smtp_addr: is required (host:port of the SMTP server, e.g. smtp.example.com:587)")
	case strings.ContainsAny(cfg.SMTPAddr, "@/"):
		// An SMTP URL (smtp://user:password@host:587) or its user part: never quoted,
		// as it may hold the password, which would go to stderr and the journal.
		return nil, errors.New("smtp_addr: is not host:port: it holds a URL's scheme or user part; " +
			"give the server alone (smtp.example.com:587), the user as username and the password as secret_env")
	case err != nil || host == "" || port == "":
		return nil, fmt.Errorf("smtp_addr: %q is not host:port (e.g. smtp.example.com:587)", cfg.SMTPAddr)
	}
	if err := dialPort(port); err != nil {
		return nil, fmt.Errorf("smtp_addr: %q: %w", cfg.SMTPAddr, err)
	}
	switch {
	case implicitTLSPort(port):
		// Such a server waits for a TLS handshake and never greets in clear: every
		// attempt would wait out its timeout and fail on "i/o timeout".
		return nil, fmt.Errorf("smtp_addr: %q: port 465 speaks TLS from the first byte, and hookdedup speaks STARTTLS: "+
			"give the server's submission port, 587", cfg.SMTPAddr)
	case cfg.From == "":
		return nil, errors.New("from: is required")
	case len(cfg.To) == 0:
		return nil, errors.New("to: is required (one or more addresses)")
	case len(cfg.Secrets) > 1:
		return nil, errors.New("secret: an email channel takes one password")
	case len(cfg.Secrets) == 1 && cfg.Username == "":
		return nil, errors.New("username: is required with a password (secret or secret_env)")
	case cfg.Username != "" && len(cfg.Secrets) == 0:
		return nil, errors.New("secret: username is set but no password: give secret or secret_env")
	}
	e := &email{addr: cfg.SMTPAddr, host: host, user: cfg.Username}
	if len(cfg.Secrets) == 1 {
		e.password = cfg.Secrets[0]
	}
	// net/mail takes a line break inside a comment as part of a valid address, and To
	// is written into the message as configured: the break would start a header of
	// its own.
	if strings.ContainsAny(cfg.From, "\r\n") {
		return nil, fmt.Errorf("from: %q holds a line break", cfg.From)
	}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("from: %q is not an email address", cfg.From)
	}
	e.from, e.fromHeader = from.Address, headerAddress(from)
	var to []string
	for _, t := range cfg.To {
		if strings.ContainsAny(t, "\r\n") {
			return nil, fmt.Errorf("to: %q holds a line break", t)
		}
		a, err := mail.ParseAddress(t)
		if err != nil {
			return nil, fmt.Errorf("to: %q is not an email address", t)
		}
		e.to, to = append(e.to, a.Address), append(to, headerAddress(a))
	}
	e.toHeader = strings.Join(to, ", ")
	if cfg.CAFile != "" {
		if e.roots, err = readCAFile(cfg.CAFile); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// readCAFile reads path, a ca_file setting, into the pool of CAs a channel trusts instead
// of the system's. Its errors name the setting and the file: os.ReadFile's hold the path.
func readCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file: %s holds no PEM certificate", path)
	}
	return roots, nil
}

func (e *email) send(ctx context.Context, m Message) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	defer conn.Close()
	// The SMTP conversation reads and writes the connection, which knows nothing of
	// ctx: its deadline bounds the conversation, and a stop (ctx cancelled) ends it at
	// once, as it ends a webhook's request. Without this, a server that takes the
	// connection and never answers holds serve's shutdown for the channel's timeout.
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	defer c.Close()
	if err := c.Hello(heloName(conn)); err != nil {
		return fmt.Errorf("smtp EHLO: %w", err)
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		return fmt.Errorf("smtp: %s does not offer STARTTLS; hookdedup sends nothing in clear", e.addr)
	}
	if err := c.StartTLS(&tls.Config{ServerName: e.host, RootCAs: e.roots, MinVersion: tls.VersionTLS12}); err != nil {
		return fmt.Errorf("smtp STARTTLS: %w", err)
	}
	if e.user != "" {
		if err := c.Auth(smtp.PlainAuth("", e.user, e.password, e.host)); err != nil {
			return fmt.Errorf("smtp AUTH: %w", err)
		}
	}
	if err := c.Mail(e.from); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	// A recipient the server refuses (a colleague who left) is left out, not the
	// message: the others still hear of the alert, and the refusal is told (PartlySent).
	// A refusal for now (4xx: a mailbox over quota, greylisting) fails the attempt
	// before the message is sent to anyone, so that the retry reaches every recipient
	// once; a refusal for good (5xx) leaves the recipient out.
	var refused []error
	for _, t := range e.to {
		if err := c.Rcpt(t); err != nil {
			if tp := (*textproto.Error)(nil); errors.As(err, &tp) && tp.Code >= 400 && tp.Code < 500 {
				return fmt.Errorf("smtp RCPT TO: %s refused for now, the message is sent again: %w", t, err)
			}
			refused = append(refused, fmt.Errorf("%s: %w", t, err))
		}
	}
	if len(refused) == len(e.to) {
		return fmt.Errorf("smtp RCPT TO: every recipient refused: %w", errors.Join(refused...))
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	var msg bytes.Buffer
	msg.WriteString(foldHeader("From", e.fromHeader))
	msg.WriteString(foldHeader("To", e.toHeader))
	msg.WriteString(foldHeader("Subject", mimeHeader(m.Title())))
	fmt.Fprintf(&msg, "Date: %s\r\n", m.At.Format(time.RFC1123Z))
	fmt.Fprintf(&msg, "Message-ID: <%s@%s>\r\n", msgIDPart(m.ID), msgIDPart(messageHost))
	// Quoted-printable keeps the body in ASCII lines of 76 characters at most: a relay
	// that does not offer 8BITMIME may refuse or mangle 8bit text (a name or a summary
	// beyond ASCII), and every server refuses a line over 998 characters (a rule named
	// at length), at every attempt.
	msg.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	qp := quotedprintable.NewWriter(&msg)
	qp.Write([]byte(strings.ReplaceAll(m.Text(), "\n", "\r\n") + "\r\n"))
	qp.Close()
	if _, err := w.Write(msg.Bytes()); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	// The server has taken the message: a QUIT that fails loses nothing, and counted
	// as a failure it would have the message sent again.
	c.Quit()
	if len(refused) > 0 {
		return &PartlySent{Err: fmt.Errorf("smtp RCPT TO: %w", errors.Join(refused...))}
	}
	return nil
}

// headerAddress is a as a From or To header holds it: the bare address without a
// display name, the name RFC 2047-encoded when it is not plain ASCII.
func headerAddress(a *mail.Address) string {
	if a.Name == "" {
		return a.Address
	}
	return a.String()
}

// PartlySent is the error of a notification that its channel took, but not for every
// recipient: it counts as sent, and what was refused is told.
type PartlySent struct{ Err error }

func (p *PartlySent) Error() string { return "sent, but not to every recipient: " + p.Err.Error() }
func (p *PartlySent) Unwrap() error { return p.Err }

// messageHost is the right-hand side of the Message-IDs this process writes: the
// machine's name, so that two installations that number their notifications alike
// still write Message-IDs of their own.
var messageHost = func() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "hookdedup"
}()

// heloName is the name an email channel gives in EHLO: this machine's name when it is a
// fully-qualified domain name, else the address of the connection's end here, as
// RFC 5321 (4.1.4) asks. A relay may refuse a bare word ("need fully-qualified
// hostname"), and then every recipient of every attempt.
func heloName(conn net.Conn) string {
	if strings.Contains(messageHost, ".") && HostNameProblem(messageHost) == "" {
		return messageHost
	}
	a, ok := conn.LocalAddr().(*net.TCPAddr)
	switch {
	case !ok:
		return "[127.0.0.1]"
	case a.IP.To4() != nil:
		return "[" + a.IP.To4().String() + "]"
	}
	return "[IPv6:" + a.IP.String() + "]"
}

// HostNameProblem says why name, in ASCII, is no DNS host name: it is longer than 253
// characters, or a dot-separated part of it is not 1 to 63 letters, digits or inner
// hyphens; "" when it is one. An email channel's EHLO and the names the server is
// reached by (console_names, acme_domains) are held to the one rule.
func HostNameProblem(name string) string {
	if len(name) > 253 {
		return "is longer than 253 characters"
	}
	for l := range strings.SplitSeq(name, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return labelProblem
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return labelProblem
			}
		}
	}
	return ""
}

const labelProblem = "is not a valid host name (each dot-separated part is 1 to 63 letters, digits or inner hyphens)"

// msgIDPart is s as a part of a Message-ID can hold it (RFC 5322 dot-atom text): every
// other character, a blank in a channel's name among them, becomes '-'.
func msgIDPart(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("!#$%&'*+-/=?^_`{|}~.", r):
			return r
		}
		return '-'
	}, s)
	for strings.Contains(s, "..") {
		s = strings.ReplaceAll(s, "..", ".")
	}
	return strings.Trim(s, ".")
}

// foldHeader writes the header field name: value, and its line break, folded before a
// blank so that its lines stay within 78 characters where a blank allows: a line of a
// message holds 998 at most (RFC 5322 2.1.1), and a server refuses one longer ("500
// Line too long"), which a Subject encoded beyond ASCII or a To of a whole team passes.
// Unfolded, the value reads as written; no line is left blank.
func foldHeader(name, value string) string {
	const width = foldWidth
	var b strings.Builder
	b.WriteString(name + ":")
	n := len(name) + 1
	for i, word := range strings.Split(value, " ") {
		if i > 0 && word != "" && n+1+len(word) > width {
			b.WriteString("\r\n")
			n = 0
		}
		b.WriteString(" " + word)
		n += 1 + len(word)
	}
	b.WriteString("\r\n")
	return b.String()
}

// foldWidth is the length foldHeader keeps a header's lines within, where a blank
// allows (RFC 5322 2.1.1 recommends 78).
const foldWidth = 78

// mimeHeader keeps a header value on one line, encoding it (RFC 2047) when it is not
// plain ASCII, or when it holds a word longer than a folded line (foldHeader): a name
// without a blank, at length, would make a line past the 998 characters a server takes,
// and encoded it goes in words of 75 characters at most, which fold.
func mimeHeader(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	encode := strings.ContainsFunc(s, func(r rune) bool { return r > '~' })
	for w := range strings.FieldsSeq(s) {
		encode = encode || len(w) > foldWidth-1
	}
	if !encode {
		return s
	}
	return encodedWords(s)
}

// encodedWords writes s as RFC 2047 encoded-words ("Q" encoding of UTF-8), each of 75
// characters at most and apart from the next by a blank, where a header may be folded.
// mime.QEncoding leaves plain ASCII as it is, however long its words.
func encodedWords(s string) string {
	const prefix, suffix, most = "=?utf-8?q?", "?=", 75
	var words []string
	var w strings.Builder
	for _, r := range s {
		var enc string
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("!*+-/", r):
			enc = string(r)
		case r == ' ':
			enc = "_"
		default:
			for _, b := range []byte(string(r)) {
				enc += fmt.Sprintf("=%02X", b)
			}
		}
		if w.Len() > 0 && len(prefix)+w.Len()+len(enc)+len(suffix) > most {
			words = append(words, prefix+w.String()+suffix)
			w.Reset()
		}
		w.WriteString(enc)
	}
	if w.Len() > 0 {
		words = append(words, prefix+w.String()+suffix)
	}
	return strings.Join(words, " ")
}
