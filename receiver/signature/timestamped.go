package signature

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The two schemes that sign a timestamp along with the body, and so can
// refuse a replay once the tolerance has passed.

// Canonical header names, so lookups skip canonicalisation; messages use
// the spelling of each provider's documentation.
const (
	swIDHeader        = "Webhook-Id"
	swTimestampHeader = "Webhook-Timestamp"
	swSignatureHeader = "Webhook-Signature"
	stripeHeader      = "Stripe-Signature"
)

// swHeaders are the names of the three headers of a Standard Webhooks
// delivery: canonical, for lookups, and as messages spell them.
type swHeaders struct {
	id, timestamp, signature             string
	idName, timestampName, signatureName string
}

var (
	standardHeaders = swHeaders{swIDHeader, swTimestampHeader, swSignatureHeader,
		"webhook-id", "webhook-timestamp", "webhook-signature"}
	// svixHeaders are the names Svix sent before Standard Webhooks named
	// them: Svix's own libraries accept both, and senders built on Svix
	// still send these.
	svixHeaders = swHeaders{"Svix-Id", "Svix-Timestamp", "Svix-Signature",
		"svix-id", "svix-timestamp", "svix-signature"}
)

// swHeadersOf returns the names h uses: Svix's when it carries none of the
// Standard Webhooks headers and some of Svix's, so that a delivery missing
// one header is told which one, in its own family's spelling.
func swHeadersOf(h http.Header) *swHeaders {
	if headerValue(h, swIDHeader) == "" && headerValue(h, swTimestampHeader) == "" && headerValue(h, swSignatureHeader) == "" &&
		(headerValue(h, svixHeaders.id) != "" || headerValue(h, svixHeaders.timestamp) != "" || headerValue(h, svixHeaders.signature) != "") {
		return &svixHeaders
	}
	return &standardHeaders
}

// standardWebhooksVerifier implements https://www.standardwebhooks.com
// (the scheme Svix uses): HMAC-SHA256 over "id.timestamp.body".
type standardWebhooksVerifier struct {
	keys *hmacKeys
	tol  time.Duration
}

// newStandardWebhooksVerifier decodes the whsec_ secrets once, here, rather
// than on every delivery.
func newStandardWebhooksVerifier(secrets []string, tol time.Duration) (Verifier, error) {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		b64, prefixed := strings.CutPrefix(s, "whsec_")
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil && !strings.Contains(b64, "=") {
			// Some generators drop the padding; the key is the same.
			key, err = base64.RawStdEncoding.DecodeString(b64)
		}
		switch {
		case err != nil && prefixed:
			return nil, fmt.Errorf("secret #%d is not valid base64 after whsec_", i+1)
		case err != nil:
			return nil, fmt.Errorf("secret #%d is not valid base64 (want whsec_ followed by base64)", i+1)
		case len(key) == 0:
			return nil, fmt.Errorf("secret #%d is empty after whsec_", i+1)
		}
		keys[i] = key
	}
	k, err := newHMACKeys(keys)
	if err != nil {
		return nil, err
	}
	return &standardWebhooksVerifier{keys: k, tol: tol}, nil
}

func (v *standardWebhooksVerifier) Scheme() string         { return schemeStandardWebhooks }
func (v *standardWebhooksVerifier) Timestamped() bool      { return true }
func (v *standardWebhooksVerifier) Integrity() bool        { return true }
func (v *standardWebhooksVerifier) DefaultEventID() string { return "header:webhook-id" }

// Verify reads the webhook-* headers, or Svix's svix-* (swHeadersOf).
func (v *standardWebhooksVerifier) Verify(h http.Header, _ url.Values, body []byte, now time.Time) error {
	return v.verify(h, body, now, nil)
}

func (v *standardWebhooksVerifier) VerifyTimestamp(h http.Header, _ url.Values, body []byte, now time.Time) (signed time.Time, err error) {
	err = v.verify(h, body, now, &signed)
	return signed, err
}

// verify is Verify, setting *signed (when not nil) as VerifyTimestamp says.
func (v *standardWebhooksVerifier) verify(h http.Header, body []byte, now time.Time, signed *time.Time) error {
	names := swHeadersOf(h)
	id, err := swID(h, names)
	if err != nil {
		return err
	}
	ts := headerValue(h, names.timestamp)
	if ts == "" {
		return missingHeader(names.timestampName)
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return malformed(names.timestampName, "want unix seconds")
	}
	sh := headerValue(h, names.signature)
	if sh == "" {
		return missingHeader(names.signatureName)
	}
	if len(sh) > maxHeader {
		return malformed(names.signatureName, fmt.Sprintf("longer than %d bytes", maxHeader))
	}

	// "v1,<base64> v1,<base64> v1a,<...>": one entry per signing secret
	// during a rotation, and other versions (v1a is Ed25519) to skip. An
	// undecodable entry is skipped too, so that one bad entry does not
	// hide a good one; it is reported only when nothing else is left.
	var sigs [maxEntries]digest
	n, entries, bad := 0, 0, ""
	for rest := sh; rest != ""; {
		var e string
		e, rest, _ = strings.Cut(rest, " ")
		if e == "" {
			continue
		}
		if entries++; entries > maxEntries {
			return malformed(names.signatureName, fmt.Sprintf("more than %d signatures", maxEntries))
		}
		ver, sig, ok := strings.Cut(e, ",")
		switch {
		case !ok:
			if bad == "" {
				bad = "want v1,<base64 signature>"
			}
		case ver != "v1":
		case !decodeBase64(&sigs[n], sig, false):
			if bad == "" {
				bad = "v1 signature is not a base64 HMAC-SHA256"
			}
		default:
			n++
		}
	}
	if n == 0 {
		if bad == "" {
			bad = "no v1 signature"
		}
		return malformed(names.signatureName, bad)
	}
	// Matched even when the time is off, to tell a delivery refused only for its
	// timestamp (whose skew is worth reporting) from a forgery (whose is not).
	late := checkTime(unix, now, v.tol)

	st := v.keys.get()
	st.pre = append(st.pre[:0], id...)
	st.pre = append(st.pre, '.')
	st.pre = append(st.pre, ts...)
	st.pre = append(st.pre, '.')
	ok = v.keys.match(st, body, sigs[:n])
	v.keys.put(st)
	return signedTime(ok, unix, late, signed)
}

// CheckID is the check of the message id that Verify makes first.
func (v *standardWebhooksVerifier) CheckID(h http.Header) error {
	_, err := swID(h, swHeadersOf(h))
	return err
}

// swID returns the message id h carries under names, or Verify's error when it is
// missing or too long.
func swID(h http.Header, names *swHeaders) (string, error) {
	id := headerValue(h, names.id)
	if id == "" {
		return "", missingHeader(names.idName)
	}
	if len(id) > maxID {
		return "", malformed(names.idName, fmt.Sprintf("longer than %d bytes", maxID))
	}
	return id, nil
}

func (v *standardWebhooksVerifier) Sign(h http.Header, _ url.Values, body []byte, now time.Time) error {
	if h == nil {
		return errNilHeader
	}
	id := headerValue(h, swIDHeader)
	if id == "" {
		id = "msg_" + rand.Text()
		h.Set(swIDHeader, id)
	}
	if len(id) > maxID {
		return fmt.Errorf("sign: webhook-id longer than %d bytes", maxID)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := v.keys.sign(id+"."+ts+".", body)
	h.Set(swTimestampHeader, ts)
	h.Set(swSignatureHeader, "v1,"+base64.StdEncoding.EncodeToString(sig))
	return nil
}

// stripeVerifier implements Stripe's Stripe-Signature header
// (https://docs.stripe.com/webhooks#verify-manually): HMAC-SHA256 over
// "timestamp.body", keyed with the whsec_ secret's bytes as they are.
type stripeVerifier struct {
	keys *hmacKeys
	tol  time.Duration
}

func newStripeVerifier(secrets []string, tol time.Duration) (Verifier, error) {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		if kind := stripeAPIKey(s); kind != "" {
			return nil, fmt.Errorf("secret #%d is a Stripe API key (%s…), not the webhook endpoint's signing secret (whsec_…): "+
				"copy the signing secret from the endpoint's page in Stripe's Dashboard", i+1, kind)
		}
		keys[i] = []byte(s)
	}
	k, err := newHMACKeys(keys)
	if err != nil {
		return nil, err
	}
	return &stripeVerifier{keys: k, tol: tol}, nil
}

// stripeAPIKey returns the prefix of a Stripe API key (secret, restricted or
// publishable), "" for anything else. Pasted where the endpoint's signing secret goes, it
// would sign nothing Stripe sends, every delivery refused as a mismatch no answer
// explains, and the configuration would hold a key to the Stripe account. The prefix
// says which key it is and nothing of it.
func stripeAPIKey(s string) string {
	for _, prefix := range [...]string{"sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_"} {
		if strings.HasPrefix(s, prefix) {
			return prefix
		}
	}
	return ""
}

func (v *stripeVerifier) Scheme() string         { return schemeStripe }
func (v *stripeVerifier) Timestamped() bool      { return true }
func (v *stripeVerifier) Integrity() bool        { return true }
func (v *stripeVerifier) DefaultEventID() string { return "/id" }

func (v *stripeVerifier) Verify(h http.Header, _ url.Values, body []byte, now time.Time) error {
	return v.verify(h, body, now, nil)
}

func (v *stripeVerifier) VerifyTimestamp(h http.Header, _ url.Values, body []byte, now time.Time) (signed time.Time, err error) {
	err = v.verify(h, body, now, &signed)
	return signed, err
}

// verify is Verify, setting *signed (when not nil) as VerifyTimestamp says.
func (v *stripeVerifier) verify(h http.Header, body []byte, now time.Time, signed *time.Time) error {
	sh := headerValue(h, stripeHeader)
	if sh == "" {
		return missingHeader(stripeHeader)
	}
	if len(sh) > maxHeader {
		return malformed(stripeHeader, fmt.Sprintf("longer than %d bytes", maxHeader))
	}

	// "t=1492774577,v1=<hex>,v1=<hex>,v0=<hex>": several v1 during a
	// rotation; v0 and unknown keys are skipped, as Stripe's libraries do.
	var sigs [maxEntries]digest
	n, entries, bad := 0, 0, ""
	ts, haveTS := "", false
	for rest := sh; rest != ""; {
		var e string
		e, rest, _ = strings.Cut(rest, ",")
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if entries++; entries > maxEntries {
			return malformed(stripeHeader, fmt.Sprintf("more than %d entries", maxEntries))
		}
		key, val, ok := strings.Cut(e, "=")
		if !ok {
			return malformed(stripeHeader, "want t=<unix seconds>,v1=<hex signature>")
		}
		switch key {
		case "t":
			// Two timestamps would make which one was signed ambiguous.
			if haveTS {
				return malformed(stripeHeader, "more than one timestamp t=")
			}
			ts, haveTS = val, true
		case "v1":
			if !decodeHex(&sigs[n], val) {
				if bad == "" {
					bad = "v1 signature is not 64 hex digits"
				}
				continue
			}
			n++
		}
	}
	if !haveTS {
		return malformed(stripeHeader, "no timestamp t=")
	}
	unix, ok := parseUnix(ts)
	if !ok {
		return malformed(stripeHeader, "timestamp t= is not unix seconds")
	}
	if n == 0 {
		if bad == "" {
			bad = "no v1 signature"
		}
		return malformed(stripeHeader, bad)
	}
	late := checkTime(unix, now, v.tol) // matched even when off: see standard-webhooks

	st := v.keys.get()
	st.pre = append(st.pre[:0], ts...)
	st.pre = append(st.pre, '.')
	ok = v.keys.match(st, body, sigs[:n])
	v.keys.put(st)
	return signedTime(ok, unix, late, signed)
}

// signedTime is the answer of a timestamped verify once the signature was compared
// (matched) and the signed time unix checked (late, nil when within the tolerance); it
// sets *signed, when not nil, to the signed time of a matching signature. A delivery
// both forged and off in time is refused for its time, as before the signature is
// compared, and its time is not reported: nobody can be shown to have signed it.
func signedTime(matched bool, unix int64, late error, signed *time.Time) error {
	switch {
	case !matched && late != nil:
		return late
	case !matched:
		return errMismatch
	}
	if signed != nil {
		*signed = time.Unix(unix, 0)
	}
	return late
}

func (v *stripeVerifier) Sign(h http.Header, _ url.Values, body []byte, now time.Time) error {
	if h == nil {
		return errNilHeader
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := v.keys.sign(ts+".", body)
	h.Set(stripeHeader, "t="+ts+",v1="+hex.EncodeToString(sig))
	return nil
}
