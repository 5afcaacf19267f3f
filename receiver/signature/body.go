package signature

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// bodyHMACConfig describes a scheme that signs the body alone, with one
// signature in one header: GitHub, Shopify and the generic hmac-sha256.
type bodyHMACConfig struct {
	scheme string
	header string // as configured or documented; used in messages
	// altHeader is another spelling of header, read when a delivery carries none of
	// it: Shopify's Events send Shopify-Hmac-Sha256 where its webhooks send
	// X-Shopify-Hmac-Sha256.
	altHeader string
	prefix    string // required before the signature when set
	base64    bool   // else hex
	base64URL bool   // also accept the URL-safe alphabet
	eventID   string
}

// bodyHMACVerifier checks HMAC-SHA256(secret, body). Nothing signed is
// time-bound, so these schemes cannot refuse a replay: DESIGN.md has the
// console say so.
type bodyHMACVerifier struct {
	bodyHMACConfig
	canonical    string // header, canonicalised once for map lookups
	altCanonical string
	keys         *hmacKeys
	noPrefix     string // "malformed" reasons, built once
	badSig       string
}

func newBodyHMACVerifier(cfg bodyHMACConfig, secrets []string) (Verifier, error) {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	k, err := newHMACKeys(keys)
	if err != nil {
		return nil, err
	}
	badSig := "signature is not 64 hex digits"
	if cfg.base64 {
		badSig = "signature is not a base64 HMAC-SHA256"
	}
	return &bodyHMACVerifier{
		bodyHMACConfig: cfg,
		canonical:      canonicalKey(cfg.header),
		altCanonical:   canonicalKey(cfg.altHeader),
		keys:           k,
		noPrefix:       "signature does not start with " + cfg.prefix,
		badSig:         badSig,
	}, nil
}

func (v *bodyHMACVerifier) Scheme() string         { return v.scheme }
func (v *bodyHMACVerifier) Timestamped() bool      { return false }
func (v *bodyHMACVerifier) Integrity() bool        { return true }
func (v *bodyHMACVerifier) DefaultEventID() string { return v.eventID }

func (v *bodyHMACVerifier) Verify(h http.Header, _ url.Values, body []byte, _ time.Time) error {
	name, s := v.header, headerValue(h, v.canonical)
	if s == "" && v.altHeader != "" {
		name, s = v.altHeader, headerValue(h, v.altCanonical)
		if s == "" {
			return missingHeader(v.header + " (or " + v.altHeader + ")")
		}
	}
	if s == "" {
		return missingHeader(v.header)
	}
	// The prefix is a label, not a secret: its case is forgiven
	// ("SHA256=" from a provider that upper-cases it).
	if n := len(v.prefix); n > 0 {
		if len(s) < n || !strings.EqualFold(s[:n], v.prefix) {
			return malformed(name, v.noPrefix)
		}
		s = s[n:]
	}
	var sig [1]digest
	var ok bool
	if v.base64 {
		ok = decodeBase64(&sig[0], s, v.base64URL)
	} else {
		ok = decodeHex(&sig[0], s)
	}
	if !ok {
		return malformed(name, v.badSig+prefixHint(v.prefix, s))
	}

	st := v.keys.get()
	st.pre = st.pre[:0]
	ok = v.keys.match(st, body, sig[:])
	v.keys.put(st)
	if !ok {
		return errMismatch
	}
	return nil
}

func (v *bodyHMACVerifier) Sign(h http.Header, _ url.Values, body []byte, _ time.Time) error {
	if h == nil {
		return errNilHeader
	}
	sig := v.keys.sign("", body)
	var enc string
	if v.base64 {
		enc = base64.StdEncoding.EncodeToString(sig)
	} else {
		enc = hex.EncodeToString(sig)
	}
	h.Set(v.canonical, v.prefix+enc)
	return nil
}

// prefixHint says, of a signature s that did not decode under a source with no
// signature_prefix, that it starts with a label such as "sha256=", which the setting
// would take off: the sender labels its signature and the configuration does not say
// so. "" otherwise. The label is a few letters and digits, not the signature: nothing
// secret is quoted.
func prefixHint(prefix, s string) string {
	if prefix != "" {
		return ""
	}
	label, _, ok := strings.Cut(s, "=")
	if !ok || label == "" || len(label) > 16 {
		return ""
	}
	for i := 0; i < len(label); i++ {
		if c := label[i] | 0x20; (c < 'a' || c > 'z') && (label[i] < '0' || label[i] > '9') && label[i] != '-' {
			return ""
		}
	}
	return `: it starts with "` + label + `=", which signature_prefix = "` + label + `=" would take off`
}
