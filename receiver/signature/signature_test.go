package receiver_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
)

// Test-level names carry a "sig" prefix: other test files of this package
// are written in parallel.

// The Standard Webhooks test vector, from the specification's own libraries
// (standard-webhooks/standard-webhooks libraries/go/webhook_test.go
// TestWebhookSign, and Svix's libraries), cross-checked with openssl.
const (
	sigSWSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	sigSWID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	sigSWTimestamp = "1614265330"
	sigSWBody      = `{"test": 2432232314}`
	sigSWSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// Stripe publishes no vector with its secret; stripe-go's tests sign at run
// time with "whsec_test_secret". This one uses that secret, Stripe's
// documented example timestamp, and a signature computed independently:
//
//	printf '%s' '1492774577.{"id": "evt_test_webhook", "object": "event"}' |
//	    openssl dgst -sha256 -hmac whsec_test_secret
const (
	sigStripeSecret    = "whsec_test_secret"
	sigStripeTimestamp = "1492774577"
	sigStripeBody      = `{"id": "evt_test_webhook", "object": "event"}`
	sigStripeV1        = "c137b1b62277d523cf8fed4dfbd0170a9a5b8a380e00cc3711d4bf0652f2ce7a"
)

// GitHub's documented test vector
// (docs.github.com, "Validating webhook deliveries", "Testing the webhook payload validation").
const (
	sigGitHubSecret    = "It's a Secret to Everybody"
	sigGitHubBody      = "Hello, World!"
	sigGitHubSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

// Shopify publishes no vector; this one comes from a third-party test
// (sqlpage's Shopify HMAC example) and was checked with openssl. The same
// body and secret give the hex vector of the generic hmac-sha256 tests.
const (
	sigShopifySecret = "test-webhook-secret"
	sigShopifyBody   = `{"id":1234567890,"email":"customer@example.com","total_price":"123.45"}`
	sigShopifyBase64 = "QNyObTlKbMx2qDlPF/ZOZcBqg5OgPg+2oky3zldc0Gw="
	sigShopifyHex    = "40dc8e6d394a6ccc76a8394f17f64e65c06a8393a03e0fb6a24cb7ce575cd06c"
)

// sigOtherSecret is a well-formed secret that signed nothing in the vectors.
const sigOtherSecret = "whsec_c2VjcmV0LW9mLWEtcm90YXRlZC1lbmRwb2ludA=="

func sigUnix(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return time.Unix(n, 0)
}

func sigMustVerifier(tb testing.TB, cfg receiver.SchemeConfig) receiver.Verifier {
	tb.Helper()
	v, err := receiver.NewVerifier(cfg)
	if err != nil {
		tb.Fatalf("NewVerifier(%+v): %v", cfg.Scheme, err)
	}
	return v
}

// sigHeaders builds an http.Header the way net/http's server would,
// canonicalising the names.
func sigHeaders(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// Independent signers, written from the providers' documents rather than
// through the package, so a bug shared by Sign and Verify cannot hide.

func sigMAC(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func sigSWSign(secret, id, ts, body string) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(sigMAC(key, id, ".", ts, ".", body))
}

func sigStripeSign(secret, ts, body string) string {
	return hex.EncodeToString(sigMAC([]byte(secret), ts, ".", body))
}

// sigLeak matches what a secret, key or signature looks like in any of the
// encodings in play; no error message needs such a run of characters.
var sigLeak = regexp.MustCompile(`[A-Za-z0-9+/_=]{20,}`)

// sigCheckErr fails unless err matches want ("" for nil, else a substring)
// and carries nothing secret.
func sigCheckErr(t *testing.T, err error, want string, secrets ...string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("got error %q, want nil", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got nil error, want one containing %q", want)
	}
	msg := err.Error()
	if !strings.Contains(msg, want) {
		t.Errorf("error %q does not contain %q", msg, want)
	}
	if m := sigLeak.FindString(msg); m != "" {
		t.Errorf("error %q contains %q, which looks like a secret or signature", msg, m)
	}
	for _, s := range secrets {
		for _, form := range []string{s, strings.TrimPrefix(s, "whsec_")} {
			if form != "" && strings.Contains(msg, form) {
				t.Errorf("error %q contains a secret", msg)
			}
		}
	}
}

type sigCase struct {
	name   string
	v      receiver.Verifier // nil: the test's default verifier
	header http.Header
	query  url.Values
	body   string
	now    time.Time
	want   string // "" when the delivery is authentic; else part of the error
}

func sigRun(t *testing.T, def receiver.Verifier, cases []sigCase, secrets ...string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			if v == nil {
				v = def
			}
			err := v.Verify(tc.header, tc.query, []byte(tc.body), tc.now)
			sigCheckErr(t, err, tc.want, secrets...)
		})
	}
}

func TestVerify_StandardWebhooks(t *testing.T) {
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigSWSecret}})
	bare := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{strings.TrimPrefix(sigSWSecret, "whsec_")}})
	wrong := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigOtherSecret}})
	rotated := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigOtherSecret, sigSWSecret}})
	short := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigSWSecret}, Tolerance: 10 * time.Second})

	signedAt := sigUnix(sigSWTimestamp)
	now := signedAt.Add(10 * time.Second)
	hdr := func(id, ts, sig string) http.Header {
		h := http.Header{}
		if id != "" {
			h.Set("webhook-id", id)
		}
		if ts != "" {
			h.Set("webhook-timestamp", ts)
		}
		if sig != "" {
			h.Set("webhook-signature", sig)
		}
		return h
	}
	valid := hdr(sigSWID, sigSWTimestamp, sigSWSignature)
	other := sigSWSign(sigOtherSecret, sigSWID, sigSWTimestamp, sigSWBody)
	bogus := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="

	sigRun(t, v, []sigCase{
		{name: "Vector", header: valid, body: sigSWBody, now: now},
		{name: "VectorAtSigningTime", header: valid, body: sigSWBody, now: signedAt},
		{name: "SecretWithoutPrefix", v: bare, header: valid, body: sigSWBody, now: now},
		{name: "LowerCaseHeaderMap", header: http.Header{
			// A map filled without canonical names is not what net/http
			// hands a handler; Verify follows h.Get and does not see it.
			"webhook-id": {sigSWID}, "webhook-timestamp": {sigSWTimestamp}, "webhook-signature": {sigSWSignature},
		}, body: sigSWBody, now: now, want: "missing header webhook-id"},
		{name: "TamperedBody", header: valid, body: `{"test": 2432232315}`, now: now, want: "signature does not match any secret"},
		{name: "EmptyBody", header: valid, body: "", now: now, want: "signature does not match any secret"},
		{name: "OtherID", header: hdr("msg_other", sigSWTimestamp, sigSWSignature), body: sigSWBody, now: now, want: "does not match"},
		{name: "OtherTimestamp", header: hdr(sigSWID, "1614265331", sigSWSignature), body: sigSWBody, now: now, want: "does not match"},
		{name: "WrongSecret", v: wrong, header: valid, body: sigSWBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: valid, body: sigSWBody, now: now},
		{name: "RotatedFirstSecret", v: rotated, header: hdr(sigSWID, sigSWTimestamp, other), body: sigSWBody, now: now},
		{name: "SeveralSignatures", header: hdr(sigSWID, sigSWTimestamp,
			bogus+" v2,"+bogus[3:]+" v1a,bm90IGVkMjU1MTk= "+sigSWSignature+" "+other), body: sigSWBody, now: now},
		{name: "SeveralSignaturesExtraSpaces", header: hdr(sigSWID, sigSWTimestamp, "  "+other+"   "+sigSWSignature+" "), body: sigSWBody, now: now},
		{name: "SeveralSignaturesNoneMatching", header: hdr(sigSWID, sigSWTimestamp, bogus+" "+other), body: sigSWBody, now: now, want: "signature does not match any secret"},
		{name: "GarbageBesideValid", header: hdr(sigSWID, sigSWTimestamp, "garbage v1,!!! "+sigSWSignature), body: sigSWBody, now: now},
		{name: "UnpaddedBase64", header: hdr(sigSWID, sigSWTimestamp, strings.TrimSuffix(sigSWSignature, "=")), body: sigSWBody, now: now},

		{name: "Stale", header: valid, body: sigSWBody, now: signedAt.Add(5*time.Minute + time.Second),
			want: "timestamp 5m1s in the past, outside tolerance 5m0s"},
		{name: "StaleByHours", header: valid, body: sigSWBody, now: signedAt.Add(7*time.Hour + 12*time.Minute + 500*time.Millisecond),
			want: "timestamp 7h12m0s in the past"},
		{name: "Future", header: valid, body: sigSWBody, now: signedAt.Add(-5*time.Minute - 2*time.Second),
			want: "timestamp 5m2s in the future, outside tolerance 5m0s"},
		{name: "EdgeOfTolerancePast", header: valid, body: sigSWBody, now: signedAt.Add(5 * time.Minute)},
		{name: "EdgeOfToleranceFuture", header: valid, body: sigSWBody, now: signedAt.Add(-5 * time.Minute)},
		{name: "ConfiguredTolerance", v: short, header: valid, body: sigSWBody, now: signedAt.Add(11 * time.Second),
			want: "timestamp 11s in the past, outside tolerance 10s"},
		{name: "StaleAndForged", header: hdr(sigSWID, sigSWTimestamp, bogus), body: sigSWBody, now: signedAt.Add(time.Hour),
			want: "in the past"},
		{name: "HugeTimestamp", header: hdr(sigSWID, "999999999999999999", sigSWSignature), body: sigSWBody, now: now,
			want: "in the future, outside tolerance 5m0s"},

		{name: "MissingAll", header: http.Header{}, body: sigSWBody, now: now, want: "missing header webhook-id"},
		{name: "NilHeader", header: nil, body: sigSWBody, now: now, want: "missing header webhook-id"},
		{name: "MissingID", header: hdr("", sigSWTimestamp, sigSWSignature), body: sigSWBody, now: now, want: "missing header webhook-id"},
		{name: "MissingTimestamp", header: hdr(sigSWID, "", sigSWSignature), body: sigSWBody, now: now, want: "missing header webhook-timestamp"},
		{name: "MissingSignature", header: hdr(sigSWID, sigSWTimestamp, ""), body: sigSWBody, now: now, want: "missing header webhook-signature"},
		{name: "LongID", header: hdr(strings.Repeat("m", 1025), sigSWTimestamp, sigSWSignature), body: sigSWBody, now: now,
			want: "malformed header webhook-id: longer than 1024 bytes"},
		{name: "TimestampNotNumber", header: hdr(sigSWID, "yesterday", sigSWSignature), body: sigSWBody, now: now,
			want: "malformed header webhook-timestamp: want unix seconds"},
		{name: "TimestampNegative", header: hdr(sigSWID, "-1614265330", sigSWSignature), body: sigSWBody, now: now,
			want: "malformed header webhook-timestamp"},
		{name: "TimestampFraction", header: hdr(sigSWID, "1614265330.5", sigSWSignature), body: sigSWBody, now: now,
			want: "malformed header webhook-timestamp"},
		{name: "TimestampMilliseconds", header: hdr(sigSWID, "1614265330000", sigSWSignature), body: sigSWBody, now: now,
			want: "in the future"},
		{name: "SignatureGarbage", header: hdr(sigSWID, sigSWTimestamp, "garbage"), body: sigSWBody, now: now,
			want: "malformed header webhook-signature: want v1,<base64 signature>"},
		{name: "SignatureWithoutVersion", header: hdr(sigSWID, sigSWTimestamp, sigSWSignature[3:]), body: sigSWBody, now: now,
			want: "malformed header webhook-signature"},
		{name: "SignatureBadBase64", header: hdr(sigSWID, sigSWTimestamp, "v1,"+strings.Repeat("!", 43)+"="), body: sigSWBody, now: now,
			want: "malformed header webhook-signature: v1 signature is not a base64 HMAC-SHA256"},
		{name: "SignatureURLSafeBase64", header: hdr(sigSWID, sigSWTimestamp, strings.NewReplacer("+", "-", "/", "_").Replace(sigSWSignature)),
			body: sigSWBody, now: now, want: "not a base64 HMAC-SHA256"},
		{name: "SignatureTruncated", header: hdr(sigSWID, sigSWTimestamp, sigSWSignature[:20]), body: sigSWBody, now: now,
			want: "not a base64 HMAC-SHA256"},
		{name: "SignatureTooLong", header: hdr(sigSWID, sigSWTimestamp, sigSWSignature+"AAAA"), body: sigSWBody, now: now,
			want: "not a base64 HMAC-SHA256"},
		{name: "SignatureEmptyV1", header: hdr(sigSWID, sigSWTimestamp, "v1,"), body: sigSWBody, now: now,
			want: "not a base64 HMAC-SHA256"},
		{name: "SignatureSpaces", header: hdr(sigSWID, sigSWTimestamp, "   "), body: sigSWBody, now: now,
			want: "malformed header webhook-signature: no v1 signature"},
		{name: "OnlyOtherVersions", header: hdr(sigSWID, sigSWTimestamp, "v2,"+sigSWSignature[3:]+" v1a,abc"), body: sigSWBody, now: now,
			want: "malformed header webhook-signature: no v1 signature"},
		{name: "TooManySignatures", header: hdr(sigSWID, sigSWTimestamp, strings.Repeat(bogus+" ", 32)+sigSWSignature), body: sigSWBody, now: now,
			want: "malformed header webhook-signature: more than 32 signatures"},
		{name: "ThirtyTwoSignatures", header: hdr(sigSWID, sigSWTimestamp, strings.Repeat(bogus+" ", 31)+sigSWSignature), body: sigSWBody, now: now},
		{name: "HeaderTooLong", header: hdr(sigSWID, sigSWTimestamp, sigSWSignature+strings.Repeat(" ", 8200)), body: sigSWBody, now: now,
			want: "malformed header webhook-signature: longer than 8192 bytes"},
	}, sigSWSecret, sigOtherSecret, sigSWSignature[3:], other[3:])
}

func TestSign_StandardWebhooksVector(t *testing.T) {
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigSWSecret, sigOtherSecret}})
	h := sigHeaders("webhook-id", sigSWID)
	if err := v.Sign(h, nil, []byte(sigSWBody), sigUnix(sigSWTimestamp)); err != nil {
		t.Fatal(err)
	}
	if got := h.Get("webhook-signature"); got != sigSWSignature {
		t.Errorf("webhook-signature = %q, want %q", got, sigSWSignature)
	}
	if got := h.Get("webhook-timestamp"); got != sigSWTimestamp {
		t.Errorf("webhook-timestamp = %q, want %q", got, sigSWTimestamp)
	}
	if got := h.Get("webhook-id"); got != sigSWID {
		t.Errorf("webhook-id = %q, want it kept as %q", got, sigSWID)
	}

	t.Run("GeneratedID", func(t *testing.T) {
		h1, h2 := http.Header{}, http.Header{}
		now := time.Now()
		for _, h := range []http.Header{h1, h2} {
			if err := v.Sign(h, nil, []byte(sigSWBody), now); err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(h, nil, []byte(sigSWBody), now); err != nil {
				t.Fatal(err)
			}
		}
		id1, id2 := h1.Get("webhook-id"), h2.Get("webhook-id")
		if !strings.HasPrefix(id1, "msg_") || len(id1) < 20 {
			t.Errorf("generated webhook-id %q, want msg_ and a random part", id1)
		}
		if id1 == id2 {
			t.Errorf("two generated ids are both %q", id1)
		}
	})
}

func TestVerify_Stripe(t *testing.T) {
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "stripe", Secrets: []string{sigStripeSecret}})
	wrong := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "stripe", Secrets: []string{sigStripeSecret + "_rolled_key"}})
	rotated := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "stripe", Secrets: []string{sigStripeSecret + "_rolled_key", sigStripeSecret}})

	signedAt := sigUnix(sigStripeTimestamp)
	now := signedAt.Add(30 * time.Second)
	hdr := func(s string) http.Header { return sigHeaders("Stripe-Signature", s) }
	ts := "t=" + sigStripeTimestamp
	valid := ts + ",v1=" + sigStripeV1
	rolled := sigStripeSign(sigStripeSecret+"_rolled_key", sigStripeTimestamp, sigStripeBody)
	bogus := strings.Repeat("ab", 32)

	sigRun(t, v, []sigCase{
		{name: "Vector", header: hdr(valid), body: sigStripeBody, now: now},
		{name: "VectorWithV0", header: hdr(valid + ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"), body: sigStripeBody, now: now},
		{name: "UpperCaseHex", header: hdr(ts + ",v1=" + strings.ToUpper(sigStripeV1)), body: sigStripeBody, now: now},
		{name: "TimestampLast", header: hdr("v1=" + sigStripeV1 + "," + ts), body: sigStripeBody, now: now},
		{name: "SpacesAroundEntries", header: hdr(ts + ", v1=" + sigStripeV1 + " "), body: sigStripeBody, now: now},
		{name: "TamperedBody", header: hdr(valid), body: `{"id": "evt_test_webhook", "object": "event" }`, now: now, want: "signature does not match any secret"},
		{name: "OtherTimestamp", header: hdr("t=1492774578,v1=" + sigStripeV1), body: sigStripeBody, now: now, want: "signature does not match any secret"},
		{name: "WrongSecret", v: wrong, header: hdr(valid), body: sigStripeBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: hdr(valid), body: sigStripeBody, now: now},
		{name: "SeveralV1", header: hdr(ts + ",v1=" + rolled + ",v1=" + sigStripeV1), body: sigStripeBody, now: now},
		{name: "SeveralV1NoneMatching", header: hdr(ts + ",v1=" + rolled + ",v1=" + bogus), body: sigStripeBody, now: now, want: "signature does not match any secret"},
		{name: "UnreadableV1BesideValid", header: hdr(valid + ",v1=bad_signature"), body: sigStripeBody, now: now},
		{name: "V0Only", header: hdr(ts + ",v0=" + sigStripeV1), body: sigStripeBody, now: now, want: "malformed header Stripe-Signature: no v1 signature"},

		{name: "Stale", header: hdr(valid), body: sigStripeBody, now: signedAt.Add(7*time.Minute + 12*time.Second),
			want: "timestamp 7m12s in the past, outside tolerance 5m0s"},
		{name: "Future", header: hdr(valid), body: sigStripeBody, now: signedAt.Add(-6 * time.Minute),
			want: "timestamp 6m0s in the future, outside tolerance 5m0s"},
		{name: "EdgeOfTolerance", header: hdr(valid), body: sigStripeBody, now: signedAt.Add(5 * time.Minute)},

		{name: "Missing", header: http.Header{}, body: sigStripeBody, now: now, want: "missing header Stripe-Signature"},
		{name: "Empty", header: hdr(""), body: sigStripeBody, now: now, want: "missing header Stripe-Signature"},
		{name: "Garbage", header: hdr("garbage"), body: sigStripeBody, now: now,
			want: "malformed header Stripe-Signature: want t=<unix seconds>,v1=<hex signature>"},
		{name: "VersionCommaTimestamp", header: hdr("v1,t=1"), body: sigStripeBody, now: now, want: "malformed header Stripe-Signature"},
		{name: "EmptyTimestamp", header: hdr("t=,v1=" + sigStripeV1), body: sigStripeBody, now: now,
			want: "malformed header Stripe-Signature: timestamp t= is not unix seconds"},
		{name: "TimestampNotNumber", header: hdr("t=now,v1=" + sigStripeV1), body: sigStripeBody, now: now, want: "timestamp t= is not unix seconds"},
		{name: "NoTimestamp", header: hdr("v1=" + sigStripeV1), body: sigStripeBody, now: now, want: "malformed header Stripe-Signature: no timestamp t="},
		{name: "TwoTimestamps", header: hdr(valid + ",t=1492774578"), body: sigStripeBody, now: now, want: "more than one timestamp t="},
		{name: "NoSignature", header: hdr(ts), body: sigStripeBody, now: now, want: "malformed header Stripe-Signature: no v1 signature"},
		{name: "BadHex", header: hdr(ts + ",v1=" + strings.Repeat("zz", 32)), body: sigStripeBody, now: now,
			want: "malformed header Stripe-Signature: v1 signature is not 64 hex digits"},
		{name: "ShortHex", header: hdr(ts + ",v1=" + sigStripeV1[:62]), body: sigStripeBody, now: now, want: "not 64 hex digits"},
		{name: "EmptyV1", header: hdr(ts + ",v1="), body: sigStripeBody, now: now, want: "not 64 hex digits"},
		{name: "Base64Instead", header: hdr(ts + ",v1=" + sigSWSignature[3:]), body: sigStripeBody, now: now, want: "not 64 hex digits"},
		{name: "TooManyEntries", header: hdr(ts + strings.Repeat(",v1="+bogus, 31) + ",v1=" + sigStripeV1), body: sigStripeBody, now: now,
			want: "malformed header Stripe-Signature: more than 32 entries"},
		{name: "ThirtyTwoEntries", header: hdr(ts + strings.Repeat(",v1="+bogus, 30) + ",v1=" + sigStripeV1), body: sigStripeBody, now: now},
		{name: "TooLong", header: hdr(valid + strings.Repeat(",", 8200)), body: sigStripeBody, now: now,
			want: "malformed header Stripe-Signature: longer than 8192 bytes"},
	}, sigStripeSecret, sigStripeV1, rolled)
}

func TestSign_StripeVector(t *testing.T) {
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "stripe", Secrets: []string{sigStripeSecret, "whsec_other"}})
	h := http.Header{}
	if err := v.Sign(h, nil, []byte(sigStripeBody), sigUnix(sigStripeTimestamp)); err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get("Stripe-Signature"), "t="+sigStripeTimestamp+",v1="+sigStripeV1; got != want {
		t.Errorf("Stripe-Signature = %q, want %q", got, want)
	}
	if got := sigStripeSign(sigStripeSecret, sigStripeTimestamp, sigStripeBody); got != sigStripeV1 {
		t.Errorf("the test's own signer disagrees with the vector: %s", got)
	}
}

func TestVerify_GitHub(t *testing.T) {
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "github", Secrets: []string{sigGitHubSecret}})
	wrong := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "github", Secrets: []string{"It's a Secret to Nobody"}})
	rotated := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "github", Secrets: []string{"new secret", sigGitHubSecret}})
	hdr := func(s string) http.Header { return sigHeaders("X-Hub-Signature-256", s) }
	now := time.Now()
	hexSig := strings.TrimPrefix(sigGitHubSignature, "sha256=")

	sigRun(t, v, []sigCase{
		{name: "Vector", header: hdr(sigGitHubSignature), body: sigGitHubBody, now: now},
		{name: "LowerCaseHeaderName", header: sigHeaders("x-hub-signature-256", sigGitHubSignature), body: sigGitHubBody, now: now},
		{name: "UpperCaseHex", header: hdr("sha256=" + strings.ToUpper(hexSig)), body: sigGitHubBody, now: now},
		{name: "AnyTime", header: hdr(sigGitHubSignature), body: sigGitHubBody, now: time.Unix(0, 0)},
		{name: "TamperedBody", header: hdr(sigGitHubSignature), body: "Hello, World?", now: now, want: "signature does not match any secret"},
		{name: "WrongSecret", v: wrong, header: hdr(sigGitHubSignature), body: sigGitHubBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: hdr(sigGitHubSignature), body: sigGitHubBody, now: now},
		{name: "Missing", header: http.Header{}, body: sigGitHubBody, now: now, want: "missing header X-Hub-Signature-256"},
		{name: "OnlySHA1Header", header: sigHeaders("X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567"), body: sigGitHubBody, now: now,
			want: "missing header X-Hub-Signature-256"},
		{name: "NoPrefix", header: hdr(hexSig), body: sigGitHubBody, now: now,
			want: "malformed header X-Hub-Signature-256: signature does not start with sha256="},
		{name: "SHA1Prefix", header: hdr("sha1=" + hexSig), body: sigGitHubBody, now: now, want: "does not start with sha256="},
		{name: "PrefixOnly", header: hdr("sha256="), body: sigGitHubBody, now: now,
			want: "malformed header X-Hub-Signature-256: signature is not 64 hex digits"},
		{name: "BadHex", header: hdr("sha256=" + strings.Repeat("g", 64)), body: sigGitHubBody, now: now, want: "not 64 hex digits"},
		{name: "OddHex", header: hdr(sigGitHubSignature[:len(sigGitHubSignature)-1]), body: sigGitHubBody, now: now, want: "not 64 hex digits"},
		{name: "Garbage", header: hdr("garbage"), body: sigGitHubBody, now: now, want: "malformed header X-Hub-Signature-256"},
	}, sigGitHubSecret, hexSig)
}

func TestVerify_Shopify(t *testing.T) {
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "shopify", Secrets: []string{sigShopifySecret}})
	wrong := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "shopify", Secrets: []string{"shpss_other"}})
	rotated := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "shopify", Secrets: []string{"shpss_other", sigShopifySecret}})
	hdr := func(s string) http.Header { return sigHeaders("X-Shopify-Hmac-Sha256", s) }
	now := time.Now()

	sigRun(t, v, []sigCase{
		{name: "Vector", header: hdr(sigShopifyBase64), body: sigShopifyBody, now: now},
		{name: "DocumentedHeaderCase", header: sigHeaders("X-Shopify-Hmac-SHA256", sigShopifyBase64), body: sigShopifyBody, now: now},
		{name: "Unpadded", header: hdr(strings.TrimSuffix(sigShopifyBase64, "=")), body: sigShopifyBody, now: now},
		{name: "TamperedBody", header: hdr(sigShopifyBase64), body: strings.Replace(sigShopifyBody, "123.45", "0.01", 1), now: now,
			want: "signature does not match any secret"},
		{name: "WrongSecret", v: wrong, header: hdr(sigShopifyBase64), body: sigShopifyBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: hdr(sigShopifyBase64), body: sigShopifyBody, now: now},
		{name: "Missing", header: http.Header{}, body: sigShopifyBody, now: now, want: "missing header X-Shopify-Hmac-Sha256"},
		{name: "HexInstead", header: hdr(sigShopifyHex), body: sigShopifyBody, now: now,
			want: "malformed header X-Shopify-Hmac-Sha256: signature is not a base64 HMAC-SHA256"},
		{name: "BadBase64", header: hdr(strings.Repeat("*", 43) + "="), body: sigShopifyBody, now: now, want: "not a base64 HMAC-SHA256"},
		{name: "DoublePadding", header: hdr(sigShopifyBase64 + "="), body: sigShopifyBody, now: now, want: "not a base64 HMAC-SHA256"},
		{name: "Truncated", header: hdr(sigShopifyBase64[:40]), body: sigShopifyBody, now: now, want: "not a base64 HMAC-SHA256"},
		{name: "Prefixed", header: hdr("sha256=" + sigShopifyBase64), body: sigShopifyBody, now: now, want: "not a base64 HMAC-SHA256"},
	}, sigShopifySecret, sigShopifyBase64, sigShopifyHex)
}

func TestVerify_HMACSHA256(t *testing.T) {
	cfg := func(enc, prefix string, secrets ...string) receiver.SchemeConfig {
		return receiver.SchemeConfig{Scheme: "hmac-sha256", Header: "X-Signature", Encoding: enc, Prefix: prefix, Secrets: secrets}
	}
	hexV := sigMustVerifier(t, cfg("", "sha256=", sigShopifySecret))
	b64 := sigMustVerifier(t, cfg("base64", "", sigShopifySecret))
	plain := sigMustVerifier(t, cfg("hex", "", sigShopifySecret))
	rotated := sigMustVerifier(t, cfg("hex", "sha256=", "cm-new", sigShopifySecret))
	wrong := sigMustVerifier(t, cfg("hex", "sha256=", "cm-new"))
	hdr := func(s string) http.Header { return sigHeaders("X-Signature", s) }
	urlSafe := strings.NewReplacer("+", "-", "/", "_").Replace(sigShopifyBase64)
	now := time.Now()

	sigRun(t, hexV, []sigCase{
		{name: "HexVector", header: hdr("sha256=" + sigShopifyHex), body: sigShopifyBody, now: now},
		{name: "HexUpperCase", header: hdr("sha256=" + strings.ToUpper(sigShopifyHex)), body: sigShopifyBody, now: now},
		{name: "PrefixUpperCase", header: hdr("SHA256=" + sigShopifyHex), body: sigShopifyBody, now: now},
		{name: "HexNoPrefixConfigured", v: plain, header: hdr(sigShopifyHex), body: sigShopifyBody, now: now},
		{name: "Base64Vector", v: b64, header: hdr(sigShopifyBase64), body: sigShopifyBody, now: now},
		{name: "Base64URLSafe", v: b64, header: hdr(urlSafe), body: sigShopifyBody, now: now},
		{name: "Base64URLSafeUnpadded", v: b64, header: hdr(strings.TrimSuffix(urlSafe, "=")), body: sigShopifyBody, now: now},
		{name: "TamperedBody", header: hdr("sha256=" + sigShopifyHex), body: sigShopifyBody + " ", now: now, want: "signature does not match any secret"},
		{name: "WrongSecret", v: wrong, header: hdr("sha256=" + sigShopifyHex), body: sigShopifyBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: hdr("sha256=" + sigShopifyHex), body: sigShopifyBody, now: now},
		{name: "Missing", header: sigHeaders("X-Other", "sha256="+sigShopifyHex), body: sigShopifyBody, now: now, want: "missing header X-Signature"},
		{name: "MissingPrefix", header: hdr(sigShopifyHex), body: sigShopifyBody, now: now,
			want: "malformed header X-Signature: signature does not start with sha256="},
		{name: "PrefixOnly", header: hdr("sha256="), body: sigShopifyBody, now: now, want: "malformed header X-Signature: signature is not 64 hex digits"},
		{name: "Base64WhereHex", header: hdr("sha256=" + sigShopifyBase64), body: sigShopifyBody, now: now, want: "not 64 hex digits"},
		{name: "HexWhereBase64", v: b64, header: hdr(sigShopifyHex), body: sigShopifyBody, now: now,
			want: "malformed header X-Signature: signature is not a base64 HMAC-SHA256"},
		{name: "PrefixWhereNone", v: plain, header: hdr("sha256=" + sigShopifyHex), body: sigShopifyBody, now: now, want: "not 64 hex digits"},
	}, sigShopifySecret, sigShopifyHex, sigShopifyBase64)
}

func TestVerify_BasicAuth(t *testing.T) {
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "basic-auth", BasicUser: "hookdedup", Secrets: []string{"pa:ss word", "old-password"}})
	basic := func(userPass string) http.Header {
		return sigHeaders("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(userPass)))
	}
	now := time.Now()

	sigRun(t, v, []sigCase{
		{name: "Valid", header: basic("hookdedup:pa:ss word"), now: now},
		{name: "RotatedSecondSecret", header: basic("hookdedup:old-password"), now: now},
		{name: "LowerCaseScheme", header: sigHeaders("Authorization", "basic "+base64.StdEncoding.EncodeToString([]byte("hookdedup:old-password"))), now: now},
		{name: "BodyIsNotChecked", header: basic("hookdedup:old-password"), body: "anything", now: now},
		{name: "WrongPassword", header: basic("hookdedup:pa:ss"), now: now, want: "user name or password does not match"},
		{name: "WrongUser", header: basic("admin:old-password"), now: now, want: "user name or password does not match"},
		{name: "UserCase", header: basic("HookDedup:old-password"), now: now, want: "user name or password does not match"},
		{name: "EmptyPassword", header: basic("hookdedup:"), now: now, want: "user name or password does not match"},
		{name: "Missing", header: http.Header{}, now: now, want: "missing header Authorization"},
		{name: "Bearer", header: sigHeaders("Authorization", "Bearer old-password"), now: now,
			want: "malformed header Authorization: want Basic credentials"},
		{name: "BasicOnly", header: sigHeaders("Authorization", "Basic"), now: now, want: "want Basic credentials"},
		{name: "BadBase64", header: sigHeaders("Authorization", "Basic hookdedup:old-password"), now: now,
			want: "malformed header Authorization: credentials are not valid base64"},
		{name: "NoColon", header: basic("hookdedup"), now: now, want: "malformed header Authorization: credentials have no ':'"},
		{name: "TooLong", header: sigHeaders("Authorization", "Basic "+strings.Repeat("QUFB", 1025)), now: now,
			want: "malformed header Authorization: credentials longer than 4096 bytes"},
		{name: "LongButValidBase64", header: basic("hookdedup:" + strings.Repeat("x", 1000)), now: now, want: "does not match"},
	}, "pa:ss word", "old-password")
}

func TestVerify_Token(t *testing.T) {
	inHeader := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "token", TokenHeader: "X-Webhook-Token", Secrets: []string{"tok-new", "tok-old"}})
	inQuery := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "token", TokenQuery: "token", Secrets: []string{"tok-new", "tok-old"}})
	now := time.Now()

	sigRun(t, inHeader, []sigCase{
		{name: "Header", header: sigHeaders("X-Webhook-Token", "tok-new"), now: now},
		{name: "HeaderRotated", header: sigHeaders("x-webhook-token", "tok-old"), now: now},
		{name: "HeaderWrong", header: sigHeaders("X-Webhook-Token", "tok-ne"), now: now, want: "token does not match any secret"},
		{name: "HeaderPrefixOfSecret", header: sigHeaders("X-Webhook-Token", "tok"), now: now, want: "token does not match any secret"},
		{name: "HeaderMissing", header: http.Header{}, query: url.Values{"token": {"tok-new"}}, now: now,
			want: "missing header X-Webhook-Token"},
		{name: "HeaderTooLong", header: sigHeaders("X-Webhook-Token", strings.Repeat("t", 5000)), now: now, want: "token longer than 4096 bytes"},
		{name: "Query", v: inQuery, query: url.Values{"token": {"tok-new"}}, now: now},
		{name: "QueryRotated", v: inQuery, query: url.Values{"token": {"tok-old"}}, now: now},
		{name: "QueryWrong", v: inQuery, query: url.Values{"token": {"TOK-NEW"}}, now: now, want: "token does not match any secret"},
		{name: "QueryMissing", v: inQuery, header: sigHeaders("X-Webhook-Token", "tok-new"), now: now,
			want: "missing query parameter token"},
		{name: "QueryNil", v: inQuery, query: nil, now: now, want: "missing query parameter token"},
	}, "tok-new", "tok-old")
}

func TestVerify_None(t *testing.T) {
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "none"})
	if err := v.Verify(nil, nil, nil, time.Time{}); err != nil {
		t.Errorf("Verify = %v, want nil", err)
	}
	h, q := http.Header{}, url.Values{}
	if err := v.Sign(h, q, []byte("{}"), time.Now()); err != nil {
		t.Errorf("Sign = %v, want nil", err)
	}
	if len(h) != 0 || len(q) != 0 {
		t.Errorf("Sign set %v %v, want nothing", h, q)
	}
}

// sigSchemeConfigs has one working config per scheme, each with two
// secrets so that Sign's use of the first one is visible.
func sigSchemeConfigs() map[string]receiver.SchemeConfig {
	return map[string]receiver.SchemeConfig{
		"standard-webhooks": {Scheme: "standard-webhooks", Secrets: []string{sigSWSecret, sigOtherSecret}},
		"stripe":            {Scheme: "stripe", Secrets: []string{sigStripeSecret, "whsec_old"}},
		"github":            {Scheme: "github", Secrets: []string{sigGitHubSecret, "old"}},
		"shopify":           {Scheme: "shopify", Secrets: []string{sigShopifySecret, "old"}},
		"hmac-sha256":       {Scheme: "hmac-sha256", Header: "X-Signature", Encoding: "base64", Prefix: "v1=", Secrets: []string{"cm", "old"}},
		"basic-auth":        {Scheme: "basic-auth", BasicUser: "ota", Secrets: []string{"pw", "old"}},
		"token":             {Scheme: "token", TokenQuery: "key", Secrets: []string{"tok", "old"}},
		"none":              {Scheme: "none"},
	}
}

func TestSign_RoundTrip(t *testing.T) {
	type props struct {
		timestamped, integrity bool
		eventID                string
	}
	want := map[string]props{
		"standard-webhooks": {true, true, "header:webhook-id"},
		"stripe":            {true, true, "/id"},
		"github":            {false, true, "header:X-GitHub-Delivery"},
		"shopify":           {false, true, "header:X-Shopify-Webhook-Id"},
		"hmac-sha256":       {false, true, ""},
		"basic-auth":        {false, false, ""},
		"token":             {false, false, ""},
		"none":              {false, false, ""},
	}
	cfgs := sigSchemeConfigs()
	body := []byte(`{"event_id":"evt_1","booking_id":"B-42","status":"cancelled"}`)
	now := time.Unix(1767225600, 0)

	for _, scheme := range receiver.Schemes {
		t.Run(scheme, func(t *testing.T) {
			cfg, ok := cfgs[scheme]
			if !ok {
				t.Fatalf("no test config for scheme %q", scheme)
			}
			v := sigMustVerifier(t, cfg)
			p := want[scheme]
			if v.Scheme() != scheme || v.Timestamped() != p.timestamped || v.Integrity() != p.integrity || v.DefaultEventID() != p.eventID {
				t.Errorf("got (%q, timestamped %v, integrity %v, event id %q), want (%q, %v, %v, %q)",
					v.Scheme(), v.Timestamped(), v.Integrity(), v.DefaultEventID(), scheme, p.timestamped, p.integrity, p.eventID)
			}

			h, q := http.Header{}, url.Values{}
			if err := v.Sign(h, q, body, now); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if err := v.Verify(h, q, body, now.Add(time.Second)); err != nil {
				t.Fatalf("Verify(Sign(...)): %v", err)
			}
			tampered := slices.Clone(body)
			tampered[len(tampered)-2] = 'X'
			if err := v.Verify(h, q, tampered, now); (err != nil) != p.integrity {
				t.Errorf("Verify(tampered body) = %v; the scheme covers the body: %v", err, p.integrity)
			}
			if p.timestamped {
				if err := v.Verify(h, q, body, now.Add(time.Hour)); err == nil {
					t.Error("Verify an hour later = nil, want stale")
				}
			}
			if scheme == "none" {
				return
			}
			// Sign uses the first secret: a verifier holding only the
			// second must refuse what it signed.
			second := cfg
			second.Secrets = cfg.Secrets[1:]
			if err := sigMustVerifier(t, second).Verify(h, q, body, now); err == nil {
				t.Error("a verifier with only the second secret accepted what Sign produced")
			}
		})
	}
}

func TestSign_NilMaps(t *testing.T) {
	for scheme, cfg := range sigSchemeConfigs() {
		v := sigMustVerifier(t, cfg)
		err := v.Sign(nil, nil, []byte("{}"), time.Now())
		if (err == nil) != (scheme == "none") {
			t.Errorf("%s: Sign(nil, nil) = %v", scheme, err)
		}
	}
	v := sigMustVerifier(t, receiver.SchemeConfig{Scheme: "token", TokenHeader: "X-Token", Secrets: []string{"tok"}})
	if err := v.Sign(http.Header{}, nil, nil, time.Now()); err != nil {
		t.Errorf("token_header Sign with nil url.Values = %v, want nil", err)
	}
}

func TestNewVerifier_Errors(t *testing.T) {
	const secret = "whsec_TOP+SECRET+VALUE!"
	const good = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tc := range []struct {
		name string
		cfg  receiver.SchemeConfig
		want string
	}{
		{"UnknownScheme", receiver.SchemeConfig{Scheme: "hmac", Secrets: []string{secret}},
			`unknown signature scheme "hmac" (want one of ` + strings.Join(receiver.Schemes, ", ") + ")"},
		{"SchemeCase", receiver.SchemeConfig{Scheme: "GitHub", Secrets: []string{secret}}, `unknown signature scheme "GitHub"`},
		{"NoScheme", receiver.SchemeConfig{Secrets: []string{secret}}, "signature scheme is required (want one of standard-webhooks, stripe,"},
		{"NoSecret", receiver.SchemeConfig{Scheme: "github"}, "secret is required"},
		{"EmptySecret", receiver.SchemeConfig{Scheme: "stripe", Secrets: []string{""}}, "secret is required"},
		{"EmptySecondSecret", receiver.SchemeConfig{Scheme: "token", TokenHeader: "X-Token", Secrets: []string{secret, ""}}, "secret #2 is empty"},
		{"SecretWithNewline", receiver.SchemeConfig{Scheme: "shopify", Secrets: []string{secret + "\n"}}, "secret #1 has leading or trailing whitespace"},
		{"NegativeTolerance", receiver.SchemeConfig{Scheme: "stripe", Secrets: []string{secret}, Tolerance: -time.Second}, "tolerance must not be negative"},
		{"SWNotBase64", receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{good, secret}}, "secret #2 is not valid base64 after whsec_"},
		{"SWNotBase64NoPrefix", receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{"TOP SECRET!"}},
			"secret #1 is not valid base64 (want whsec_ followed by base64)"},
		{"SWPrefixOnly", receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{"whsec_"}}, "secret #1 is empty after whsec_"},
		{"HMACNoHeader", receiver.SchemeConfig{Scheme: "hmac-sha256", Secrets: []string{secret}}, "signature_header is required for hmac-sha256"},
		{"HMACBadHeader", receiver.SchemeConfig{Scheme: "hmac-sha256", Header: "X Signature", Secrets: []string{secret}},
			`signature_header "X Signature" is not a valid header name`},
		{"HMACHeaderWithColon", receiver.SchemeConfig{Scheme: "hmac-sha256", Header: "X-Signature:", Secrets: []string{secret}}, "not a valid header name"},
		{"HMACBadEncoding", receiver.SchemeConfig{Scheme: "hmac-sha256", Header: "X-Sig", Encoding: "base32", Secrets: []string{secret}},
			"signature_encoding must be hex or base64"},
		{"BasicNoUser", receiver.SchemeConfig{Scheme: "basic-auth", Secrets: []string{secret}}, "basic_user is required"},
		{"BasicUserColon", receiver.SchemeConfig{Scheme: "basic-auth", BasicUser: "a:b", Secrets: []string{secret}}, "basic_user must not contain ':'"},
		{"BasicNoSecret", receiver.SchemeConfig{Scheme: "basic-auth", BasicUser: "ota"}, "secret is required"},
		{"TokenNeither", receiver.SchemeConfig{Scheme: "token", Secrets: []string{secret}}, "set exactly one of token_header and token_query"},
		{"TokenBoth", receiver.SchemeConfig{Scheme: "token", TokenHeader: "X-Token", TokenQuery: "token", Secrets: []string{secret}},
			"set exactly one of token_header and token_query"},
		{"TokenBadHeader", receiver.SchemeConfig{Scheme: "token", TokenHeader: "X-Token\r\n", Secrets: []string{secret}}, "token_header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := receiver.NewVerifier(tc.cfg)
			if v != nil {
				t.Errorf("got a verifier along with the error")
			}
			sigCheckErr(t, err, tc.want, secret, good)
		})
	}
}

func TestNewVerifier_Accepts(t *testing.T) {
	for _, cfg := range []receiver.SchemeConfig{
		{Scheme: "none", Secrets: []string{"ignored"}},
		{Scheme: "standard-webhooks", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{Scheme: "standard-webhooks", Secrets: []string{"whsec_c2VjcmV0LW9mLWEtcm90YXRlZC1lbmRwb2ludA"}}, // unpadded
		{Scheme: "stripe", Secrets: []string{"not base64 at all: stripe keys are raw"}, Tolerance: time.Hour},
		{Scheme: "hmac-sha256", Header: "x-signature", Encoding: "hex", Secrets: []string{"s"}},
		{Scheme: "github", Secrets: []string{"s"}, Header: "ignored for github"},
	} {
		if _, err := receiver.NewVerifier(cfg); err != nil {
			t.Errorf("NewVerifier(%+v) = %v", cfg, err)
		}
	}
}
