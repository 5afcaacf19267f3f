package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Scheme names as they appear in the config's `signature` field.
const (
	schemeStandardWebhooks = "standard-webhooks"
	schemeStripe           = "stripe"
	schemeGitHub           = "github"
	schemeShopify          = "shopify"
	schemeHMACSHA256       = "hmac-sha256"
	schemeBasicAuth        = "basic-auth"
	schemeToken            = "token"
	schemeNone             = "none"
)

// Schemes lists the scheme names, for error messages and docs.
var Schemes = []string{
	schemeStandardWebhooks, schemeStripe, schemeGitHub, schemeShopify,
	schemeHMACSHA256, schemeBasicAuth, schemeToken, schemeNone, schemeAdyen,
}

// schemeList is spelled out rather than joined from Schemes, which is a
// mutable exported slice: a caller appending to it must not change what
// New accepts or says. A test keeps the two in step.
const schemeList = "standard-webhooks, stripe, github, shopify, hmac-sha256, basic-auth, token, none, adyen"

const (
	// DefaultTolerance is a timestamped scheme's tolerance when Config leaves it 0.
	// It matches Stripe's and the Standard Webhooks libraries' default, so a
	// provider's own documentation holds.
	DefaultTolerance = 5 * time.Minute

	// maxHeader and maxEntries bound the work an unauthenticated
	// caller can make us do: every entry may cost an HMAC comparison.
	maxHeader  = 8 << 10
	maxEntries = 32

	// maxID bounds webhook-id, which is copied into a pooled buffer on
	// every delivery; real ids are a few dozen bytes.
	maxID = 1 << 10
)

// Config is one source's signature settings, as read from the TOML config.
type Config struct {
	Scheme      string        // standard-webhooks | stripe | github | shopify | hmac-sha256 | basic-auth | token | none | adyen
	Secrets     []string      // one or more (rotation: a delivery verifies if ANY secret matches)
	Tolerance   time.Duration // for timestamped schemes; 0 means the default 5m
	Header      string        // hmac-sha256: header carrying the signature (required for that scheme)
	Encoding    string        // hmac-sha256: "hex" (default) or "base64"
	Prefix      string        // hmac-sha256: optional prefix such as "sha256="
	BasicUser   string        // basic-auth: required user name; the secret is the password
	TokenHeader string        // token: header carrying the token, or
	TokenQuery  string        // token: query parameter carrying the token (exactly one of the two)
}

// Placeholder returns a secret of the form scheme takes (standard-webhooks: whsec_ and
// base64; adyen: a hex HMAC key; the others: any text), for a command that builds a
// source to show or to key with, and never verifies or signs with its secret.
func Placeholder(scheme string) string {
	switch scheme {
	case "standard-webhooks":
		return "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	case "adyen":
		return strings.Repeat("00", 32)
	}
	return "placeholder"
}

// Verifier checks and produces one scheme's signatures.
//
// A Verifier is safe for concurrent use: the intake handler shares one per
// source across all requests.
type Verifier interface {
	// Verify returns nil when the delivery is authentic; otherwise an error whose text says what was wrong
	// (missing header X, malformed header, timestamp 7m12s in the past / future, outside tolerance 5m0s,
	// signature does not match any secret) and NEVER contains a secret or an expected signature,
	// because the text is sent back to the caller.
	Verify(h http.Header, q url.Values, body []byte, now time.Time) error
	// Sign sets on h (or q for token_query) what a provider would send for body at time now, using the FIRST secret.
	// Used by the `demo` command and by tests. For standard-webhooks it needs a message id: it uses
	// h.Get("webhook-id") if set, else generates a random "msg_..." id and sets it.
	// It returns an error if the map it must write to is nil.
	Sign(h http.Header, q url.Values, body []byte, now time.Time) error
	// Scheme returns the scheme name.
	Scheme() string
	// Timestamped reports whether the scheme signs a timestamp (replay protection).
	// true for standard-webhooks and stripe only, whose Verifiers are also
	// TimestampVerifiers.
	Timestamped() bool
	// Integrity reports whether the body is covered by the check (false for basic-auth, token, none).
	Integrity() bool
	// DefaultEventID is where the scheme's provider puts its event id, in the config syntax:
	// standard-webhooks "header:webhook-id", stripe "/id", github "header:X-GitHub-Delivery",
	// shopify "header:X-Shopify-Webhook-Id", others "".
	DefaultEventID() string
}

// IDHeaderOf returns the header an event id configured as read from header name is read
// from in h, for a source signed with scheme, in the family of headers that h carries,
// as Verify reads them, and spelt as that family's sender documents it, as Verify's
// messages spell it, since messages and the console say the name:
//
//   - under standard-webhooks, for either spelling of the message id (webhook-id,
//     svix-id), the one of the family h carries (swHeadersOf), in lower case, so that
//     the id is the one the signature covers. Read by its configured name, a delivery carrying both
//     families could sign one id and be keyed on another, unsigned: a captured
//     delivery could then be replayed under any id.
//   - under shopify, a header of Shopify's webhooks (X-Shopify-…) is read without its
//     "X-" from a delivery of Shopify's Events, which spell them so and whose signature
//     Verify reads from Shopify-Hmac-Sha256: the delivery id of Events is
//     Shopify-Webhook-Id.
//
// Any other name, or scheme, leaves name as it is.
func IDHeaderOf(scheme, name string, h http.Header) string {
	switch scheme {
	case schemeStandardWebhooks:
		// EqualFold rather than the canonical form: this runs for every delivery, and the
		// configured name is usually lower case, which canonicalising would allocate for.
		if strings.EqualFold(name, standardHeaders.id) || strings.EqualFold(name, svixHeaders.id) {
			return swHeadersOf(h).idName
		}
	case schemeShopify:
		if len(name) > len("X-Shopify-") && strings.EqualFold(name[:len("X-Shopify-")], "X-Shopify-") &&
			headerValue(h, shopifyHMACHeader) == "" && headerValue(h, shopifyEventsHMACHeader) != "" {
			return name[len("X-"):]
		}
	}
	return name
}

// SignsIDHeader reports whether scheme's signature covers the header name, read as an
// event id: only Standard Webhooks signs its message id (webhook-id, svix-id). Keyed on
// any other header, a captured delivery sent again under another id is a new event.
func SignsIDHeader(scheme, name string) bool {
	return scheme == schemeStandardWebhooks &&
		(strings.EqualFold(name, standardHeaders.id) || strings.EqualFold(name, svixHeaders.id))
}

// The headers of Shopify's signature: its webhooks' and its Events'.
const (
	shopifyHMACHeader       = "X-Shopify-Hmac-Sha256"
	shopifyEventsHMACHeader = "Shopify-Hmac-Sha256"
)

// IDSigner is a Verifier whose scheme signs the delivery's message id
// (standard-webhooks: webhook-id, or svix-id), so that Verify refuses a delivery
// without one whatever its signature: such a delivery is never keyed.
type IDSigner interface {
	Verifier
	// CheckID returns the error Verify returns for the message id in h when it is
	// missing or malformed, and nil when Verify would go on to the signature.
	CheckID(h http.Header) error
}

// TimestampVerifier is a Verifier of a timestamped scheme (standard-webhooks, stripe),
// which can also say when an authentic delivery was signed: set against the time it
// arrived, how far the senders' clocks are from this machine's.
type TimestampVerifier interface {
	Verifier
	// VerifyTimestamp is Verify, also returning the timestamp the delivery signed
	// whenever its signature matches one of the secrets: with a nil error, and also
	// with the error of a timestamp outside the tolerance, the one refusal a drifting
	// clock causes. The time is zero whenever the signature is missing, malformed or
	// matches no secret, so that no caller without a secret can feed a measure of
	// skew. It does not allocate on the path of an authentic delivery either.
	VerifyTimestamp(h http.Header, q url.Values, body []byte, now time.Time) (signed time.Time, err error)
}

// Challenger is a Verifier of a scheme that HTTP asks for with a challenge (basic-auth).
// A refusal of its source carries the challenge in WWW-Authenticate, as RFC 9110 requires
// of a 401: a sender whose client sends its credentials only when challenged (.NET's
// HttpClient given Credentials, Java's Authenticator) then sends them.
type Challenger interface {
	Verifier
	// Challenge is the WWW-Authenticate value: no secret, and the same for every delivery.
	Challenge() string
}

// New validates cfg and returns its Verifier. Errors name the config
// field that is wrong and identify a bad secret by its position (#1, #2, …),
// never by its value, because they end up in logs.
// Scheme "none" needs no secret and ignores any given; every other scheme
// needs at least one secret, and none of its secrets may be empty.
// Fields that belong to another scheme are ignored.
func New(cfg Config) (Verifier, error) {
	if cfg.Tolerance < 0 {
		return nil, errors.New("tolerance must not be negative")
	}
	tol := cfg.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	switch cfg.Scheme {
	case schemeNone:
		return noneVerifier{}, nil
	case "":
		return nil, fmt.Errorf("signature scheme is required (want one of %s)", schemeList)
	case schemeStandardWebhooks, schemeStripe, schemeGitHub, schemeShopify, schemeHMACSHA256, schemeBasicAuth, schemeToken, schemeAdyen:
	default:
		return nil, fmt.Errorf("unknown signature scheme %q (want one of %s)", cfg.Scheme, schemeList)
	}
	if err := checkSecrets(cfg.Secrets); err != nil {
		return nil, err
	}

	switch cfg.Scheme {
	case schemeStandardWebhooks:
		return newStandardWebhooksVerifier(cfg.Secrets, tol)
	case schemeStripe:
		return newStripeVerifier(cfg.Secrets, tol)
	case schemeGitHub:
		return newBodyHMACVerifier(bodyHMACConfig{
			scheme: schemeGitHub, header: "X-Hub-Signature-256", prefix: "sha256=",
			eventID: "header:X-GitHub-Delivery",
		}, cfg.Secrets)
	case schemeShopify:
		return newBodyHMACVerifier(bodyHMACConfig{
			scheme: schemeShopify, header: shopifyHMACHeader, altHeader: shopifyEventsHMACHeader, base64: true,
			eventID: "header:X-Shopify-Webhook-Id",
		}, cfg.Secrets)
	case schemeHMACSHA256:
		if cfg.Header == "" {
			return nil, errors.New("signature_header is required for hmac-sha256")
		}
		if !validHeaderName(cfg.Header) {
			return nil, fmt.Errorf("signature_header %q is not a valid header name", cfg.Header)
		}
		var b64 bool
		switch cfg.Encoding {
		case "", "hex":
		case "base64":
			b64 = true
		default:
			return nil, fmt.Errorf("signature_encoding must be hex or base64, not %q", cfg.Encoding)
		}
		return newBodyHMACVerifier(bodyHMACConfig{
			scheme: schemeHMACSHA256, header: cfg.Header, prefix: cfg.Prefix,
			base64: b64, base64URL: b64,
		}, cfg.Secrets)
	case schemeBasicAuth:
		return newBasicAuthVerifier(cfg.BasicUser, cfg.Secrets)
	case schemeAdyen:
		return newAdyenVerifier(cfg.Secrets)
	default: // schemeToken
		return newTokenVerifier(cfg.TokenHeader, cfg.TokenQuery, cfg.Secrets)
	}
}

// checkSecrets refuses empty secrets because an HMAC with an empty key,
// or an empty token, is one anybody can produce. It also refuses edge
// whitespace: a secret read from a file or environment with a trailing
// newline would otherwise fail every delivery with a baffling mismatch.
func checkSecrets(secrets []string) error {
	if len(secrets) == 0 || len(secrets) == 1 && secrets[0] == "" {
		return errors.New("secret is required")
	}
	for i, s := range secrets {
		if s == "" {
			return fmt.Errorf("secret #%d is empty", i+1)
		}
		if strings.TrimSpace(s) != s {
			return fmt.Errorf("secret #%d has leading or trailing whitespace", i+1)
		}
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 field name, so that a
// typo such as "X Signature" fails at start-up instead of on every delivery.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// headerValue returns the first value of the header whose canonical name is
// key. Looking the map up directly with a name canonicalised once, at
// construction, saves h.Get's per-call canonicalisation (which allocates for
// lower-case names such as "webhook-id").
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// canonicalKey is textproto's canonical form, computed once per verifier.
func canonicalKey(name string) string { return textproto.CanonicalMIMEHeaderKey(name) }

// errMismatch is the one answer for a well-formed signature that no secret
// produced; it names no secret, so it can be shared.
var errMismatch = errors.New("signature does not match any secret")

func missingHeader(name string) error { return fmt.Errorf("missing header %s", name) }

func malformed(name, why string) error {
	return fmt.Errorf("malformed header %s: %s", name, why)
}

// checkTime refuses a signed timestamp too far from now in either
// direction: old ones are replays, future ones would stay replayable for
// longer than the tolerance once signed.
func checkTime(unix int64, now time.Time, tol time.Duration) error {
	// Sub saturates instead of overflowing, so absurd timestamps still yield
	// a sensible message.
	age := now.Sub(time.Unix(unix, 0))
	switch {
	case age > tol:
		return fmt.Errorf("timestamp %s in the past, outside tolerance %s", age.Truncate(time.Second), tol)
	case age < -tol:
		ahead := -age
		if ahead < 0 { // -math.MinInt64 overflows
			ahead = math.MaxInt64
		}
		far := ahead.Truncate(time.Second).String()
		if ahead >= maxSub {
			// The figure Sub saturated at would be a false one.
			far = "more than 292 years"
		}
		if InMilliseconds(unix) {
			return fmt.Errorf("timestamp %d is in milliseconds (%s), not the unix seconds it is read as: %s in the future, outside tolerance %s",
				unix, time.UnixMilli(unix).UTC().Format(time.RFC3339), far, tol)
		}
		return fmt.Errorf("timestamp %s in the future, outside tolerance %s", far, tol)
	}
	return nil
}

// InMilliseconds reports whether a signed timestamp read as unix seconds is one in
// milliseconds: thirteen digits, a time from 2001 to 2286 in milliseconds, a slip
// senders make; as seconds it is tens of thousands of years ahead.
func InMilliseconds(unix int64) bool { return unix >= 1e12 && unix < 1e13 }

// maxSub is the longest time.Time.Sub returns: a longer span saturates at it.
const maxSub = time.Duration(math.MaxInt64) - time.Second

// parseUnix parses decimal unix seconds. It is stricter than
// strconv.ParseInt (no sign, no underscores) because providers send plain
// digits, and it does not allocate on bad input, which is what an attacker
// sends.
func parseUnix(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// digest is one decoded HMAC-SHA256 signature.
type digest = [sha256.Size]byte

// decodeHex decodes exactly one SHA-256 digest written in hex of either
// case. Comparing decoded bytes rather than strings is what makes "AB" and
// "ab" the same signature.
func decodeHex(dst *digest, s string) bool {
	if len(s) != hex.EncodedLen(sha256.Size) {
		return false
	}
	// Copying into a stack array avoids the allocation of []byte(s).
	var src [2 * sha256.Size]byte
	copy(src[:], s)
	n, err := hex.Decode(dst[:], src[:])
	return err == nil && n == sha256.Size
}

// decodeBase64 decodes exactly one SHA-256 digest in standard base64,
// padded or not; urlOK also admits the URL-safe alphabet, which some
// generic providers use.
func decodeBase64(dst *digest, s string, urlOK bool) bool {
	const raw = (8*sha256.Size + 5) / 6 // 43 characters, then one '='
	if len(s) == raw+1 && s[raw] == '=' {
		s = s[:raw]
	}
	if len(s) != raw {
		return false
	}
	var src [raw]byte
	copy(src[:], s)
	enc := base64.RawStdEncoding
	if urlOK && strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	n, err := enc.Decode(dst[:], src[:])
	return err == nil && n == sha256.Size
}

// hmacKeys holds a scheme's HMAC keys and a pool of keyed HMAC states.
// hmac.New costs several allocations and two SHA-256 blocks per key; a
// pooled state only needs Reset, which restores the keyed state saved on
// first use. That is most of what keeps Verify allocation-free.
type hmacKeys struct {
	keys [][]byte
	pool sync.Pool
}

// hmacState is per-call scratch space. Everything handed to hash.Hash
// methods escapes (they are interface calls), so buffers live here rather
// than on the stack.
type hmacState struct {
	macs []hash.Hash // one per key, in the order of the secrets
	sum  digest
	pre  []byte // what is signed before the body: "id.ts." or "ts."
}

// newHMACKeys builds the first state eagerly so that a key hmac.New refuses
// (it panics on keys shorter than 112 bits under GODEBUG=fips140=only) is a
// start-up error, not a panic on the request path.
func newHMACKeys(keys [][]byte) (k *hmacKeys, err error) {
	k = &hmacKeys{keys: keys}
	k.pool.New = func() any {
		st := &hmacState{macs: make([]hash.Hash, len(keys)), pre: make([]byte, 0, 64)}
		for i, key := range keys {
			st.macs[i] = hmac.New(sha256.New, key)
		}
		return st
	}
	defer func() {
		if r := recover(); r != nil {
			k, err = nil, fmt.Errorf("secret is unusable as an HMAC key: %v", r)
		}
	}()
	k.pool.Put(k.pool.New())
	return k, nil
}

func (k *hmacKeys) get() *hmacState   { return k.pool.Get().(*hmacState) }
func (k *hmacKeys) put(st *hmacState) { k.pool.Put(st) }

// match reports whether HMAC(key, st.pre || body) equals one of sigs for
// any key. Each comparison is constant-time; stopping at the first match
// reveals only that a delivery was authentic, which its sender knows.
func (k *hmacKeys) match(st *hmacState, body []byte, sigs []digest) bool {
	for _, mac := range st.macs {
		mac.Reset()
		if len(st.pre) > 0 {
			mac.Write(st.pre)
		}
		mac.Write(body)
		sum := mac.Sum(st.sum[:0])
		for i := range sigs {
			if hmac.Equal(sum, sigs[i][:]) {
				return true
			}
		}
	}
	return false
}

// sign returns HMAC(first key, pre || body), as a provider would send it.
func (k *hmacKeys) sign(pre string, body []byte) []byte {
	mac := hmac.New(sha256.New, k.keys[0])
	mac.Write([]byte(pre))
	mac.Write(body)
	return mac.Sum(nil)
}

// errNilHeader is Sign's answer to a nil header map, which it cannot fill.
var errNilHeader = errors.New("sign: nil http.Header")

// noneVerifier accepts everything, for sources whose config says so
// explicitly.
type noneVerifier struct{}

func (noneVerifier) Verify(http.Header, url.Values, []byte, time.Time) error { return nil }
func (noneVerifier) Sign(http.Header, url.Values, []byte, time.Time) error   { return nil }
func (noneVerifier) Scheme() string                                          { return schemeNone }
func (noneVerifier) Timestamped() bool                                       { return false }
func (noneVerifier) Integrity() bool                                         { return false }
func (noneVerifier) DefaultEventID() string                                  { return "" }
