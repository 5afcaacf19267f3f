package signature_test

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

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// The Standard Webhooks test vector, from the specification's own libraries
// (standard-webhooks/standard-webhooks libraries/go/webhook_test.go
// TestWebhookSign, and Svix's libraries), cross-checked with openssl.
const (
	swSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTimestamp = "1614265330"
	swBody      = `{"test": 2432232314}`
	swSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// Stripe publishes no vector with its secret; stripe-go's tests sign at run
// time with "whsec_test_secret". This one uses that secret, Stripe's
// documented example timestamp, and a signature computed independently:
//
//	printf '%s' '1492774577.{"id": "evt_test_webhook", "object": "event"}' |
//	    openssl dgst -sha256 -hmac whsec_test_secret
const (
	stripeSecret    = "whsec_test_secret"
	stripeTimestamp = "1492774577"
	stripeBody      = `{"id": "evt_test_webhook", "object": "event"}`
	stripeV1        = "c137b1b62277d523cf8fed4dfbd0170a9a5b8a380e00cc3711d4bf0652f2ce7a"
)

// GitHub's documented test vector
// (docs.github.com, "Validating webhook deliveries", "Testing the webhook payload validation").
const (
	githubSecret    = "It's a Secret to Everybody"
	githubBody      = "Hello, World!"
	githubSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

// Shopify publishes no vector; this one comes from a third-party test
// (sqlpage's Shopify HMAC example) and was checked with openssl. The same
// body and secret give the hex vector of the generic hmac-sha256 tests.
const (
	shopifySecret = "test-webhook-secret"
	shopifyBody   = `{"id":1234567890,"email":"customer@example.com","total_price":"123.45"}`
	shopifyBase64 = "QNyObTlKbMx2qDlPF/ZOZcBqg5OgPg+2oky3zldc0Gw="
	shopifyHex    = "40dc8e6d394a6ccc76a8394f17f64e65c06a8393a03e0fb6a24cb7ce575cd06c"
)

// otherSecret is a well-formed secret that signed nothing in the vectors.
const otherSecret = "whsec_c2VjcmV0LW9mLWEtcm90YXRlZC1lbmRwb2ludA=="

func unixTime(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return time.Unix(n, 0)
}

func mustVerifier(tb testing.TB, cfg signature.Config) signature.Verifier {
	tb.Helper()
	v, err := signature.New(cfg)
	if err != nil {
		tb.Fatalf("New(%+v): %v", cfg.Scheme, err)
	}
	return v
}

// headers builds an http.Header the way net/http's server would,
// canonicalising the names.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// Independent signers, written from the providers' documents rather than
// through the package, so a bug shared by Sign and Verify cannot hide.

func hmacOf(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func swSign(secret, id, ts, body string) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(hmacOf(key, id, ".", ts, ".", body))
}

func stripeSign(secret, ts, body string) string {
	return hex.EncodeToString(hmacOf([]byte(secret), ts, ".", body))
}

// leakPattern matches what a secret, key or signature looks like in any of the
// encodings in play; no error message needs such a run of characters.
var leakPattern = regexp.MustCompile(`[A-Za-z0-9+/_=]{20,}`)

// checkErr fails unless err matches want ("" for nil, else a substring)
// and carries nothing secret.
func checkErr(t *testing.T, err error, want string, secrets ...string) {
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
	if m := leakPattern.FindString(msg); m != "" {
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

type verifyCase struct {
	name   string
	v      signature.Verifier // nil: the test's default verifier
	header http.Header
	query  url.Values
	body   string
	now    time.Time
	want   string // "" when the delivery is authentic; else part of the error
}

func runCases(t *testing.T, def signature.Verifier, cases []verifyCase, secrets ...string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			if v == nil {
				v = def
			}
			err := v.Verify(tc.header, tc.query, []byte(tc.body), tc.now)
			checkErr(t, err, tc.want, secrets...)
		})
	}
}

func TestVerify_StandardWebhooks(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "standard-webhooks", Secrets: []string{swSecret}})
	bare := mustVerifier(t, signature.Config{Scheme: "standard-webhooks", Secrets: []string{strings.TrimPrefix(swSecret, "whsec_")}})
	wrong := mustVerifier(t, signature.Config{Scheme: "standard-webhooks", Secrets: []string{otherSecret}})
	rotated := mustVerifier(t, signature.Config{Scheme: "standard-webhooks", Secrets: []string{otherSecret, swSecret}})
	short := mustVerifier(t, signature.Config{Scheme: "standard-webhooks", Secrets: []string{swSecret}, Tolerance: 10 * time.Second})

	signedAt := unixTime(swTimestamp)
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
	valid := hdr(swID, swTimestamp, swSignature)
	other := swSign(otherSecret, swID, swTimestamp, swBody)
	bogus := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="

	runCases(t, v, []verifyCase{
		{name: "Vector", header: valid, body: swBody, now: now},
		{name: "VectorAtSigningTime", header: valid, body: swBody, now: signedAt},
		{name: "SecretWithoutPrefix", v: bare, header: valid, body: swBody, now: now},
		{name: "LowerCaseHeaderMap", header: http.Header{
			// A map filled without canonical names is not what net/http
			// hands a handler; Verify follows h.Get and does not see it.
			"webhook-id": {swID}, "webhook-timestamp": {swTimestamp}, "webhook-signature": {swSignature},
		}, body: swBody, now: now, want: "missing header webhook-id"},
		{name: "TamperedBody", header: valid, body: `{"test": 2432232315}`, now: now, want: "signature does not match any secret"},
		{name: "EmptyBody", header: valid, body: "", now: now, want: "signature does not match any secret"},
		{name: "OtherID", header: hdr("msg_other", swTimestamp, swSignature), body: swBody, now: now, want: "does not match"},
		{name: "OtherTimestamp", header: hdr(swID, "1614265331", swSignature), body: swBody, now: now, want: "does not match"},
		{name: "WrongSecret", v: wrong, header: valid, body: swBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: valid, body: swBody, now: now},
		{name: "RotatedFirstSecret", v: rotated, header: hdr(swID, swTimestamp, other), body: swBody, now: now},
		{name: "SeveralSignatures", header: hdr(swID, swTimestamp,
			bogus+" v2,"+bogus[3:]+" v1a,bm90IGVkMjU1MTk= "+swSignature+" "+other), body: swBody, now: now},
		{name: "SeveralSignaturesExtraSpaces", header: hdr(swID, swTimestamp, "  "+other+"   "+swSignature+" "), body: swBody, now: now},
		{name: "SeveralSignaturesNoneMatching", header: hdr(swID, swTimestamp, bogus+" "+other), body: swBody, now: now, want: "signature does not match any secret"},
		{name: "GarbageBesideValid", header: hdr(swID, swTimestamp, "garbage v1,!!! "+swSignature), body: swBody, now: now},
		{name: "UnpaddedBase64", header: hdr(swID, swTimestamp, strings.TrimSuffix(swSignature, "=")), body: swBody, now: now},

		{name: "Stale", header: valid, body: swBody, now: signedAt.Add(5*time.Minute + time.Second),
			want: "timestamp 5m1s in the past, outside tolerance 5m0s"},
		{name: "StaleByHours", header: valid, body: swBody, now: signedAt.Add(7*time.Hour + 12*time.Minute + 500*time.Millisecond),
			want: "timestamp 7h12m0s in the past"},
		{name: "Future", header: valid, body: swBody, now: signedAt.Add(-5*time.Minute - 2*time.Second),
			want: "timestamp 5m2s in the future, outside tolerance 5m0s"},
		{name: "EdgeOfTolerancePast", header: valid, body: swBody, now: signedAt.Add(5 * time.Minute)},
		{name: "EdgeOfToleranceFuture", header: valid, body: swBody, now: signedAt.Add(-5 * time.Minute)},
		{name: "ConfiguredTolerance", v: short, header: valid, body: swBody, now: signedAt.Add(11 * time.Second),
			want: "timestamp 11s in the past, outside tolerance 10s"},
		{name: "StaleAndForged", header: hdr(swID, swTimestamp, bogus), body: swBody, now: signedAt.Add(time.Hour),
			want: "in the past"},
		{name: "HugeTimestamp", header: hdr(swID, "999999999999999999", swSignature), body: swBody, now: now,
			want: "timestamp more than 292 years in the future, outside tolerance 5m0s"},

		{name: "MissingAll", header: http.Header{}, body: swBody, now: now, want: "missing header webhook-id"},
		{name: "NilHeader", header: nil, body: swBody, now: now, want: "missing header webhook-id"},
		{name: "MissingID", header: hdr("", swTimestamp, swSignature), body: swBody, now: now, want: "missing header webhook-id"},
		{name: "MissingTimestamp", header: hdr(swID, "", swSignature), body: swBody, now: now, want: "missing header webhook-timestamp"},
		{name: "MissingSignature", header: hdr(swID, swTimestamp, ""), body: swBody, now: now, want: "missing header webhook-signature"},
		{name: "LongID", header: hdr(strings.Repeat("m", 1025), swTimestamp, swSignature), body: swBody, now: now,
			want: "malformed header webhook-id: longer than 1024 bytes"},
		{name: "TimestampNotNumber", header: hdr(swID, "yesterday", swSignature), body: swBody, now: now,
			want: "malformed header webhook-timestamp: want unix seconds"},
		{name: "TimestampNegative", header: hdr(swID, "-1614265330", swSignature), body: swBody, now: now,
			want: "malformed header webhook-timestamp"},
		{name: "TimestampFraction", header: hdr(swID, "1614265330.5", swSignature), body: swBody, now: now,
			want: "malformed header webhook-timestamp"},
		{name: "TimestampMilliseconds", header: hdr(swID, "1614265330000", swSignature), body: swBody, now: now,
			want: "timestamp 1614265330000 is in milliseconds (2021-02-25T15:02:10Z), not the unix seconds it is read as: more than 292 years in the future, outside tolerance 5m0s"},
		{name: "SignatureGarbage", header: hdr(swID, swTimestamp, "garbage"), body: swBody, now: now,
			want: "malformed header webhook-signature: want v1,<base64 signature>"},
		{name: "SignatureWithoutVersion", header: hdr(swID, swTimestamp, swSignature[3:]), body: swBody, now: now,
			want: "malformed header webhook-signature"},
		{name: "SignatureBadBase64", header: hdr(swID, swTimestamp, "v1,"+strings.Repeat("!", 43)+"="), body: swBody, now: now,
			want: "malformed header webhook-signature: v1 signature is not a base64 HMAC-SHA256"},
		{name: "SignatureURLSafeBase64", header: hdr(swID, swTimestamp, strings.NewReplacer("+", "-", "/", "_").Replace(swSignature)),
			body: swBody, now: now, want: "not a base64 HMAC-SHA256"},
		{name: "SignatureTruncated", header: hdr(swID, swTimestamp, swSignature[:20]), body: swBody, now: now,
			want: "not a base64 HMAC-SHA256"},
		{name: "SignatureTooLong", header: hdr(swID, swTimestamp, swSignature+"AAAA"), body: swBody, now: now,
			want: "not a base64 HMAC-SHA256"},
		{name: "SignatureEmptyV1", header: hdr(swID, swTimestamp, "v1,"), body: swBody, now: now,
			want: "not a base64 HMAC-SHA256"},
		{name: "SignatureSpaces", header: hdr(swID, swTimestamp, "   "), body: swBody, now: now,
			want: "malformed header webhook-signature: no v1 signature"},
		{name: "OnlyOtherVersions", header: hdr(swID, swTimestamp, "v2,"+swSignature[3:]+" v1a,abc"), body: swBody, now: now,
			want: "malformed header webhook-signature: no v1 signature"},
		{name: "TooManySignatures", header: hdr(swID, swTimestamp, strings.Repeat(bogus+" ", 32)+swSignature), body: swBody, now: now,
			want: "malformed header webhook-signature: more than 32 signatures"},
		{name: "ThirtyTwoSignatures", header: hdr(swID, swTimestamp, strings.Repeat(bogus+" ", 31)+swSignature), body: swBody, now: now},
		{name: "HeaderTooLong", header: hdr(swID, swTimestamp, swSignature+strings.Repeat(" ", 8200)), body: swBody, now: now,
			want: "malformed header webhook-signature: longer than 8192 bytes"},
	}, swSecret, otherSecret, swSignature[3:], other[3:])
}

func TestSign_StandardWebhooksVector(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "standard-webhooks", Secrets: []string{swSecret, otherSecret}})
	h := headers("webhook-id", swID)
	if err := v.Sign(h, nil, []byte(swBody), unixTime(swTimestamp)); err != nil {
		t.Fatal(err)
	}
	if got := h.Get("webhook-signature"); got != swSignature {
		t.Errorf("webhook-signature = %q, want %q", got, swSignature)
	}
	if got := h.Get("webhook-timestamp"); got != swTimestamp {
		t.Errorf("webhook-timestamp = %q, want %q", got, swTimestamp)
	}
	if got := h.Get("webhook-id"); got != swID {
		t.Errorf("webhook-id = %q, want it kept as %q", got, swID)
	}

	t.Run("GeneratedID", func(t *testing.T) {
		h1, h2 := http.Header{}, http.Header{}
		now := time.Now()
		for _, h := range []http.Header{h1, h2} {
			if err := v.Sign(h, nil, []byte(swBody), now); err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(h, nil, []byte(swBody), now); err != nil {
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
	v := mustVerifier(t, signature.Config{Scheme: "stripe", Secrets: []string{stripeSecret}})
	wrong := mustVerifier(t, signature.Config{Scheme: "stripe", Secrets: []string{stripeSecret + "_rolled_key"}})
	rotated := mustVerifier(t, signature.Config{Scheme: "stripe", Secrets: []string{stripeSecret + "_rolled_key", stripeSecret}})

	signedAt := unixTime(stripeTimestamp)
	now := signedAt.Add(30 * time.Second)
	hdr := func(s string) http.Header { return headers("Stripe-Signature", s) }
	ts := "t=" + stripeTimestamp
	valid := ts + ",v1=" + stripeV1
	rolled := stripeSign(stripeSecret+"_rolled_key", stripeTimestamp, stripeBody)
	bogus := strings.Repeat("ab", 32)

	runCases(t, v, []verifyCase{
		{name: "Vector", header: hdr(valid), body: stripeBody, now: now},
		{name: "VectorWithV0", header: hdr(valid + ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"), body: stripeBody, now: now},
		{name: "UpperCaseHex", header: hdr(ts + ",v1=" + strings.ToUpper(stripeV1)), body: stripeBody, now: now},
		{name: "TimestampLast", header: hdr("v1=" + stripeV1 + "," + ts), body: stripeBody, now: now},
		{name: "SpacesAroundEntries", header: hdr(ts + ", v1=" + stripeV1 + " "), body: stripeBody, now: now},
		{name: "TamperedBody", header: hdr(valid), body: `{"id": "evt_test_webhook", "object": "event" }`, now: now, want: "signature does not match any secret"},
		{name: "OtherTimestamp", header: hdr("t=1492774578,v1=" + stripeV1), body: stripeBody, now: now, want: "signature does not match any secret"},
		{name: "WrongSecret", v: wrong, header: hdr(valid), body: stripeBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: hdr(valid), body: stripeBody, now: now},
		{name: "SeveralV1", header: hdr(ts + ",v1=" + rolled + ",v1=" + stripeV1), body: stripeBody, now: now},
		{name: "SeveralV1NoneMatching", header: hdr(ts + ",v1=" + rolled + ",v1=" + bogus), body: stripeBody, now: now, want: "signature does not match any secret"},
		{name: "UnreadableV1BesideValid", header: hdr(valid + ",v1=bad_signature"), body: stripeBody, now: now},
		{name: "V0Only", header: hdr(ts + ",v0=" + stripeV1), body: stripeBody, now: now, want: "malformed header Stripe-Signature: no v1 signature"},

		{name: "Stale", header: hdr(valid), body: stripeBody, now: signedAt.Add(7*time.Minute + 12*time.Second),
			want: "timestamp 7m12s in the past, outside tolerance 5m0s"},
		{name: "Future", header: hdr(valid), body: stripeBody, now: signedAt.Add(-6 * time.Minute),
			want: "timestamp 6m0s in the future, outside tolerance 5m0s"},
		{name: "EdgeOfTolerance", header: hdr(valid), body: stripeBody, now: signedAt.Add(5 * time.Minute)},
		{name: "TimestampMilliseconds", header: hdr("t=1492774577000,v1=" + stripeV1), body: stripeBody, now: now,
			want: "timestamp 1492774577000 is in milliseconds (2017-04-21T11:36:17Z), not the unix seconds it is read as"},

		{name: "Missing", header: http.Header{}, body: stripeBody, now: now, want: "missing header Stripe-Signature"},
		{name: "Empty", header: hdr(""), body: stripeBody, now: now, want: "missing header Stripe-Signature"},
		{name: "Garbage", header: hdr("garbage"), body: stripeBody, now: now,
			want: "malformed header Stripe-Signature: want t=<unix seconds>,v1=<hex signature>"},
		{name: "VersionCommaTimestamp", header: hdr("v1,t=1"), body: stripeBody, now: now, want: "malformed header Stripe-Signature"},
		{name: "EmptyTimestamp", header: hdr("t=,v1=" + stripeV1), body: stripeBody, now: now,
			want: "malformed header Stripe-Signature: timestamp t= is not unix seconds"},
		{name: "TimestampNotNumber", header: hdr("t=now,v1=" + stripeV1), body: stripeBody, now: now, want: "timestamp t= is not unix seconds"},
		{name: "NoTimestamp", header: hdr("v1=" + stripeV1), body: stripeBody, now: now, want: "malformed header Stripe-Signature: no timestamp t="},
		{name: "TwoTimestamps", header: hdr(valid + ",t=1492774578"), body: stripeBody, now: now, want: "more than one timestamp t="},
		{name: "NoSignature", header: hdr(ts), body: stripeBody, now: now, want: "malformed header Stripe-Signature: no v1 signature"},
		{name: "BadHex", header: hdr(ts + ",v1=" + strings.Repeat("zz", 32)), body: stripeBody, now: now,
			want: "malformed header Stripe-Signature: v1 signature is not 64 hex digits"},
		{name: "ShortHex", header: hdr(ts + ",v1=" + stripeV1[:62]), body: stripeBody, now: now, want: "not 64 hex digits"},
		{name: "EmptyV1", header: hdr(ts + ",v1="), body: stripeBody, now: now, want: "not 64 hex digits"},
		{name: "Base64Instead", header: hdr(ts + ",v1=" + swSignature[3:]), body: stripeBody, now: now, want: "not 64 hex digits"},
		{name: "TooManyEntries", header: hdr(ts + strings.Repeat(",v1="+bogus, 31) + ",v1=" + stripeV1), body: stripeBody, now: now,
			want: "malformed header Stripe-Signature: more than 32 entries"},
		{name: "ThirtyTwoEntries", header: hdr(ts + strings.Repeat(",v1="+bogus, 30) + ",v1=" + stripeV1), body: stripeBody, now: now},
		{name: "TooLong", header: hdr(valid + strings.Repeat(",", 8200)), body: stripeBody, now: now,
			want: "malformed header Stripe-Signature: longer than 8192 bytes"},
	}, stripeSecret, stripeV1, rolled)
}

func TestSign_StripeVector(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "stripe", Secrets: []string{stripeSecret, "whsec_other"}})
	h := http.Header{}
	if err := v.Sign(h, nil, []byte(stripeBody), unixTime(stripeTimestamp)); err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get("Stripe-Signature"), "t="+stripeTimestamp+",v1="+stripeV1; got != want {
		t.Errorf("Stripe-Signature = %q, want %q", got, want)
	}
	if got := stripeSign(stripeSecret, stripeTimestamp, stripeBody); got != stripeV1 {
		t.Errorf("the test's own signer disagrees with the vector: %s", got)
	}
}

func TestVerify_GitHub(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "github", Secrets: []string{githubSecret}})
	wrong := mustVerifier(t, signature.Config{Scheme: "github", Secrets: []string{"It's a Secret to Nobody"}})
	rotated := mustVerifier(t, signature.Config{Scheme: "github", Secrets: []string{"new secret", githubSecret}})
	hdr := func(s string) http.Header { return headers("X-Hub-Signature-256", s) }
	now := time.Now()
	hexSig := strings.TrimPrefix(githubSignature, "sha256=")

	runCases(t, v, []verifyCase{
		{name: "Vector", header: hdr(githubSignature), body: githubBody, now: now},
		{name: "LowerCaseHeaderName", header: headers("x-hub-signature-256", githubSignature), body: githubBody, now: now},
		{name: "UpperCaseHex", header: hdr("sha256=" + strings.ToUpper(hexSig)), body: githubBody, now: now},
		{name: "AnyTime", header: hdr(githubSignature), body: githubBody, now: time.Unix(0, 0)},
		{name: "TamperedBody", header: hdr(githubSignature), body: "Hello, World?", now: now, want: "signature does not match any secret"},
		{name: "WrongSecret", v: wrong, header: hdr(githubSignature), body: githubBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: hdr(githubSignature), body: githubBody, now: now},
		{name: "Missing", header: http.Header{}, body: githubBody, now: now, want: "missing header X-Hub-Signature-256"},
		{name: "OnlySHA1Header", header: headers("X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567"), body: githubBody, now: now,
			want: "missing header X-Hub-Signature-256"},
		{name: "NoPrefix", header: hdr(hexSig), body: githubBody, now: now,
			want: "malformed header X-Hub-Signature-256: signature does not start with sha256="},
		{name: "SHA1Prefix", header: hdr("sha1=" + hexSig), body: githubBody, now: now, want: "does not start with sha256="},
		{name: "PrefixOnly", header: hdr("sha256="), body: githubBody, now: now,
			want: "malformed header X-Hub-Signature-256: signature is not 64 hex digits"},
		{name: "BadHex", header: hdr("sha256=" + strings.Repeat("g", 64)), body: githubBody, now: now, want: "not 64 hex digits"},
		{name: "OddHex", header: hdr(githubSignature[:len(githubSignature)-1]), body: githubBody, now: now, want: "not 64 hex digits"},
		{name: "Garbage", header: hdr("garbage"), body: githubBody, now: now, want: "malformed header X-Hub-Signature-256"},
	}, githubSecret, hexSig)
}

func TestVerify_Shopify(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "shopify", Secrets: []string{shopifySecret}})
	wrong := mustVerifier(t, signature.Config{Scheme: "shopify", Secrets: []string{"shpss_other"}})
	rotated := mustVerifier(t, signature.Config{Scheme: "shopify", Secrets: []string{"shpss_other", shopifySecret}})
	hdr := func(s string) http.Header { return headers("X-Shopify-Hmac-Sha256", s) }
	now := time.Now()

	runCases(t, v, []verifyCase{
		{name: "Vector", header: hdr(shopifyBase64), body: shopifyBody, now: now},
		{name: "DocumentedHeaderCase", header: headers("X-Shopify-Hmac-SHA256", shopifyBase64), body: shopifyBody, now: now},
		{name: "Unpadded", header: hdr(strings.TrimSuffix(shopifyBase64, "=")), body: shopifyBody, now: now},
		{name: "TamperedBody", header: hdr(shopifyBase64), body: strings.Replace(shopifyBody, "123.45", "0.01", 1), now: now,
			want: "signature does not match any secret"},
		{name: "WrongSecret", v: wrong, header: hdr(shopifyBase64), body: shopifyBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: hdr(shopifyBase64), body: shopifyBody, now: now},
		{name: "Missing", header: http.Header{}, body: shopifyBody, now: now,
			want: "missing header X-Shopify-Hmac-Sha256 (or Shopify-Hmac-Sha256)"},
		{name: "HexInstead", header: hdr(shopifyHex), body: shopifyBody, now: now,
			want: "malformed header X-Shopify-Hmac-Sha256: signature is not a base64 HMAC-SHA256"},
		// Shopify's Events spell their headers without "X-".
		{name: "Events", header: headers("Shopify-Hmac-Sha256", shopifyBase64), body: shopifyBody, now: now},
		{name: "EventsTamperedBody", header: headers("Shopify-Hmac-Sha256", shopifyBase64), body: shopifyBody + " ", now: now,
			want: "signature does not match any secret"},
		{name: "EventsHexInstead", header: headers("Shopify-Hmac-Sha256", shopifyHex), body: shopifyBody, now: now,
			want: "malformed header Shopify-Hmac-Sha256: signature is not a base64 HMAC-SHA256"},
		// A webhook's header is the one checked when a delivery carries both.
		{name: "BothWebhooksChecked", header: http.Header{"X-Shopify-Hmac-Sha256": {shopifyHex}, "Shopify-Hmac-Sha256": {shopifyBase64}},
			body: shopifyBody, now: now, want: "malformed header X-Shopify-Hmac-Sha256"},
		{name: "BadBase64", header: hdr(strings.Repeat("*", 43) + "="), body: shopifyBody, now: now, want: "not a base64 HMAC-SHA256"},
		{name: "DoublePadding", header: hdr(shopifyBase64 + "="), body: shopifyBody, now: now, want: "not a base64 HMAC-SHA256"},
		{name: "Truncated", header: hdr(shopifyBase64[:40]), body: shopifyBody, now: now, want: "not a base64 HMAC-SHA256"},
		{name: "Prefixed", header: hdr("sha256=" + shopifyBase64), body: shopifyBody, now: now, want: "not a base64 HMAC-SHA256"},
	}, shopifySecret, shopifyBase64, shopifyHex)
}

func TestVerify_HMACSHA256(t *testing.T) {
	cfg := func(enc, prefix string, secrets ...string) signature.Config {
		return signature.Config{Scheme: "hmac-sha256", Header: "X-Signature", Encoding: enc, Prefix: prefix, Secrets: secrets}
	}
	hexV := mustVerifier(t, cfg("", "sha256=", shopifySecret))
	b64 := mustVerifier(t, cfg("base64", "", shopifySecret))
	plain := mustVerifier(t, cfg("hex", "", shopifySecret))
	rotated := mustVerifier(t, cfg("hex", "sha256=", "cm-new", shopifySecret))
	wrong := mustVerifier(t, cfg("hex", "sha256=", "cm-new"))
	hdr := func(s string) http.Header { return headers("X-Signature", s) }
	urlSafe := strings.NewReplacer("+", "-", "/", "_").Replace(shopifyBase64)
	now := time.Now()

	runCases(t, hexV, []verifyCase{
		{name: "HexVector", header: hdr("sha256=" + shopifyHex), body: shopifyBody, now: now},
		{name: "HexUpperCase", header: hdr("sha256=" + strings.ToUpper(shopifyHex)), body: shopifyBody, now: now},
		{name: "PrefixUpperCase", header: hdr("SHA256=" + shopifyHex), body: shopifyBody, now: now},
		{name: "HexNoPrefixConfigured", v: plain, header: hdr(shopifyHex), body: shopifyBody, now: now},
		{name: "Base64Vector", v: b64, header: hdr(shopifyBase64), body: shopifyBody, now: now},
		{name: "Base64URLSafe", v: b64, header: hdr(urlSafe), body: shopifyBody, now: now},
		{name: "Base64URLSafeUnpadded", v: b64, header: hdr(strings.TrimSuffix(urlSafe, "=")), body: shopifyBody, now: now},
		{name: "TamperedBody", header: hdr("sha256=" + shopifyHex), body: shopifyBody + " ", now: now, want: "signature does not match any secret"},
		{name: "WrongSecret", v: wrong, header: hdr("sha256=" + shopifyHex), body: shopifyBody, now: now, want: "signature does not match any secret"},
		{name: "RotatedSecondSecret", v: rotated, header: hdr("sha256=" + shopifyHex), body: shopifyBody, now: now},
		{name: "Missing", header: headers("X-Other", "sha256="+shopifyHex), body: shopifyBody, now: now, want: "missing header X-Signature"},
		{name: "MissingPrefix", header: hdr(shopifyHex), body: shopifyBody, now: now,
			want: "malformed header X-Signature: signature does not start with sha256="},
		{name: "PrefixOnly", header: hdr("sha256="), body: shopifyBody, now: now, want: "malformed header X-Signature: signature is not 64 hex digits"},
		{name: "Base64WhereHex", header: hdr("sha256=" + shopifyBase64), body: shopifyBody, now: now, want: "not 64 hex digits"},
		{name: "HexWhereBase64", v: b64, header: hdr(shopifyHex), body: shopifyBody, now: now,
			want: "malformed header X-Signature: signature is not a base64 HMAC-SHA256"},
		{name: "PrefixWhereNone", v: plain, header: hdr("sha256=" + shopifyHex), body: shopifyBody, now: now,
			want: `malformed header X-Signature: signature is not 64 hex digits: it starts with "sha256=", which signature_prefix = "sha256=" would take off`},
		{name: "PrefixWhereNoneBase64", v: b64, header: hdr("v1=" + shopifyBase64), body: shopifyBody, now: now,
			want: `signature is not a base64 HMAC-SHA256: it starts with "v1=", which signature_prefix = "v1=" would take off`},
	}, shopifySecret, shopifyHex, shopifyBase64)
}

// TestVerify_HMACSHA256PrefixHintQuotesALabelOnly: the hint about an unconfigured
// signature_prefix quotes what comes before the "=" only when it is a short label of
// letters and digits: a header of anything else is not echoed into the answer and the
// log.
func TestVerify_HMACSHA256PrefixHintQuotesALabelOnly(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "hmac-sha256", Header: "X-Signature", Secrets: []string{shopifySecret}})
	for _, junk := range []string{"<script>=", "a-very-long-label-indeed=", "=", "sha 256="} {
		err := v.Verify(headers("X-Signature", junk+shopifyHex), nil, []byte(shopifyBody), time.Now())
		if err == nil || !strings.HasSuffix(err.Error(), "signature is not 64 hex digits") {
			t.Errorf("%q: %v; want the bare malformed signature", junk, err)
		}
	}
}

func TestVerify_BasicAuth(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "basic-auth", BasicUser: "hookdedup", Secrets: []string{"pa:ss word", "old-password"}})
	basic := func(userPass string) http.Header {
		return headers("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(userPass)))
	}
	now := time.Now()

	runCases(t, v, []verifyCase{
		{name: "Valid", header: basic("hookdedup:pa:ss word"), now: now},
		{name: "RotatedSecondSecret", header: basic("hookdedup:old-password"), now: now},
		{name: "LowerCaseScheme", header: headers("Authorization", "basic "+base64.StdEncoding.EncodeToString([]byte("hookdedup:old-password"))), now: now},
		{name: "BodyIsNotChecked", header: basic("hookdedup:old-password"), body: "anything", now: now},
		{name: "WrongPassword", header: basic("hookdedup:pa:ss"), now: now, want: "user name or password does not match"},
		{name: "WrongUser", header: basic("admin:old-password"), now: now, want: "user name or password does not match"},
		{name: "UserCase", header: basic("HookDedup:old-password"), now: now, want: "user name or password does not match"},
		{name: "EmptyPassword", header: basic("hookdedup:"), now: now, want: "user name or password does not match"},
		{name: "Missing", header: http.Header{}, now: now, want: "missing header Authorization"},
		{name: "Bearer", header: headers("Authorization", "Bearer old-password"), now: now,
			want: "malformed header Authorization: want Basic credentials"},
		{name: "BasicOnly", header: headers("Authorization", "Basic"), now: now, want: "want Basic credentials"},
		{name: "BadBase64", header: headers("Authorization", "Basic hookdedup:old-password"), now: now,
			want: "malformed header Authorization: credentials are not valid base64"},
		{name: "NoColon", header: basic("hookdedup"), now: now, want: "malformed header Authorization: credentials have no ':'"},
		{name: "TooLong", header: headers("Authorization", "Basic "+strings.Repeat("QUFB", 1025)), now: now,
			want: "malformed header Authorization: credentials longer than 4096 bytes"},
		{name: "LongButValidBase64", header: basic("hookdedup:" + strings.Repeat("x", 1000)), now: now, want: "does not match"},
	}, "pa:ss word", "old-password")
}

func TestVerify_Token(t *testing.T) {
	inHeader := mustVerifier(t, signature.Config{Scheme: "token", TokenHeader: "X-Webhook-Token", Secrets: []string{"tok-new", "tok-old"}})
	inQuery := mustVerifier(t, signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{"tok-new", "tok-old"}})
	inPlusQuery := mustVerifier(t, signature.Config{Scheme: "token", TokenQuery: "token", Secrets: []string{"tok+new"}})
	inPlusHeader := mustVerifier(t, signature.Config{Scheme: "token", TokenHeader: "X-Webhook-Token", Secrets: []string{"tok+new"}})
	now := time.Now()

	runCases(t, inHeader, []verifyCase{
		{name: "Header", header: headers("X-Webhook-Token", "tok-new"), now: now},
		{name: "HeaderRotated", header: headers("x-webhook-token", "tok-old"), now: now},
		{name: "HeaderWrong", header: headers("X-Webhook-Token", "tok-ne"), now: now, want: "token does not match any secret"},
		{name: "HeaderPrefixOfSecret", header: headers("X-Webhook-Token", "tok"), now: now, want: "token does not match any secret"},
		{name: "HeaderMissing", header: http.Header{}, query: url.Values{"token": {"tok-new"}}, now: now,
			want: "missing header X-Webhook-Token"},
		{name: "HeaderTooLong", header: headers("X-Webhook-Token", strings.Repeat("t", 5000)), now: now, want: "token longer than 4096 bytes"},
		{name: "Query", v: inQuery, query: url.Values{"token": {"tok-new"}}, now: now},
		{name: "QueryRotated", v: inQuery, query: url.Values{"token": {"tok-old"}}, now: now},
		{name: "QueryWrong", v: inQuery, query: url.Values{"token": {"TOK-NEW"}}, now: now, want: "token does not match any secret"},
		// A query reads '+' as a space: a token written into the URL as it is verifies.
		{name: "QueryPlusAsSpace", v: inPlusQuery, query: url.Values{"token": {"tok new"}}, now: now},
		{name: "QueryPlus", v: inPlusQuery, query: url.Values{"token": {"tok+new"}}, now: now},
		{name: "QueryPlusWrong", v: inPlusQuery, query: url.Values{"token": {"tok+ne"}}, now: now, want: "token does not match any secret"},
		{name: "HeaderSpaceIsNoPlus", v: inPlusHeader, header: headers("X-Webhook-Token", "tok new"), now: now, want: "token does not match any secret"},
		{name: "QueryMissing", v: inQuery, header: headers("X-Webhook-Token", "tok-new"), now: now,
			want: "missing query parameter token"},
		{name: "QueryNil", v: inQuery, query: nil, now: now, want: "missing query parameter token"},
		// More than one value is refused whatever they are, never matched one by one: which
		// one a proxy, a log or the sender meant is not for the verifier to guess.
		{name: "QueryRepeatedEmptyFirst", v: inQuery, query: url.Values{"token": {"", "tok-new"}}, now: now,
			want: "query parameter token is given 2 times: send it once"},
		{name: "QueryRepeatedWrongFirst", v: inQuery, query: url.Values{"token": {"x", "tok-new"}}, now: now,
			want: "query parameter token is given 2 times: send it once"},
		{name: "QueryRepeatedRight", v: inQuery, query: url.Values{"token": {"tok-new", "tok-new", "tok-old"}}, now: now,
			want: "query parameter token is given 3 times: send it once"},
		// As a header, the same: a second line of it is no second chance.
		{name: "HeaderRepeatedWrongFirst", header: http.Header{"X-Webhook-Token": {"x", "tok-new"}}, now: now,
			want: "header X-Webhook-Token is given 2 times: send it once"},
		{name: "HeaderRepeatedRightFirst", header: http.Header{"X-Webhook-Token": {"tok-new", "x"}}, now: now,
			want: "header X-Webhook-Token is given 2 times: send it once"},
	}, "tok-new", "tok-old")
}

// TestVerify_TokenBearer: a provider that sends its token in Authorization sends it as
// "Bearer <token>" (RFC 6750). Its token alone as the secret verifies, as the whole value
// does; any other scheme, a wrong token, or the prefix in another header does not.
func TestVerify_TokenBearer(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "token", TokenHeader: "Authorization", Secrets: []string{"tok-new", "Bearer tok-old"}})
	other := mustVerifier(t, signature.Config{Scheme: "token", TokenHeader: "X-Webhook-Token", Secrets: []string{"tok-new"}})
	now := time.Now()
	runCases(t, v, []verifyCase{
		{name: "Bearer", header: headers("Authorization", "Bearer tok-new"), now: now},
		{name: "LowerCaseScheme", header: headers("Authorization", "bearer tok-new"), now: now},
		{name: "WholeValueAsSecret", header: headers("Authorization", "Bearer tok-old"), now: now},
		{name: "TokenAlone", header: headers("Authorization", "tok-new"), now: now},
		{name: "BearerWrong", header: headers("Authorization", "Bearer tok-ne"), now: now, want: "token does not match any secret"},
		{name: "BearerEmpty", header: headers("Authorization", "Bearer "), now: now, want: "token does not match any secret"},
		{name: "OtherScheme", header: headers("Authorization", "Basic tok-new"), now: now, want: "token does not match any secret"},
		{name: "TwoSpaces", header: headers("Authorization", "Bearer  tok-new"), now: now, want: "token does not match any secret"},
		{name: "OtherHeader", v: other, header: headers("X-Webhook-Token", "Bearer tok-new"), now: now, want: "token does not match any secret"},
	}, "tok-new", "Bearer tok-old")
}

func TestVerify_None(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "none"})
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

// schemeConfigs has one working config per scheme, each with two
// secrets so that Sign's use of the first one is visible.
func schemeConfigs() map[string]signature.Config {
	return map[string]signature.Config{
		"standard-webhooks": {Scheme: "standard-webhooks", Secrets: []string{swSecret, otherSecret}},
		"stripe":            {Scheme: "stripe", Secrets: []string{stripeSecret, "whsec_old"}},
		"github":            {Scheme: "github", Secrets: []string{githubSecret, "old"}},
		"shopify":           {Scheme: "shopify", Secrets: []string{shopifySecret, "old"}},
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
	cfgs := schemeConfigs()
	body := []byte(`{"event_id":"evt_1","booking_id":"B-42","status":"cancelled"}`)
	now := time.Unix(1767225600, 0)

	for _, scheme := range signature.Schemes {
		t.Run(scheme, func(t *testing.T) {
			if scheme == "adyen" {
				t.Skip("signs inside the body, which Sign cannot change: adyen_test.go covers it")
			}
			cfg, ok := cfgs[scheme]
			if !ok {
				t.Fatalf("no test config for scheme %q", scheme)
			}
			v := mustVerifier(t, cfg)
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
			if err := mustVerifier(t, second).Verify(h, q, body, now); err == nil {
				t.Error("a verifier with only the second secret accepted what Sign produced")
			}
		})
	}
}

func TestSign_NilMaps(t *testing.T) {
	for scheme, cfg := range schemeConfigs() {
		v := mustVerifier(t, cfg)
		err := v.Sign(nil, nil, []byte("{}"), time.Now())
		if (err == nil) != (scheme == "none") {
			t.Errorf("%s: Sign(nil, nil) = %v", scheme, err)
		}
	}
	v := mustVerifier(t, signature.Config{Scheme: "token", TokenHeader: "X-Token", Secrets: []string{"tok"}})
	if err := v.Sign(http.Header{}, nil, nil, time.Now()); err != nil {
		t.Errorf("token_header Sign with nil url.Values = %v, want nil", err)
	}
}

func TestNew_Errors(t *testing.T) {
	const secret = "whsec_TOP+SECRET+VALUE!"
	const good = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, tc := range []struct {
		name string
		cfg  signature.Config
		want string
	}{
		{"UnknownScheme", signature.Config{Scheme: "hmac", Secrets: []string{secret}},
			`unknown signature scheme "hmac" (want one of ` + strings.Join(signature.Schemes, ", ") + ")"},
		{"SchemeCase", signature.Config{Scheme: "GitHub", Secrets: []string{secret}}, `unknown signature scheme "GitHub"`},
		{"NoScheme", signature.Config{Secrets: []string{secret}}, "signature scheme is required (want one of standard-webhooks, stripe,"},
		{"NoSecret", signature.Config{Scheme: "github"}, "secret is required"},
		{"EmptySecret", signature.Config{Scheme: "stripe", Secrets: []string{""}}, "secret is required"},
		{"EmptySecondSecret", signature.Config{Scheme: "token", TokenHeader: "X-Token", Secrets: []string{secret, ""}}, "secret #2 is empty"},
		{"SecretWithNewline", signature.Config{Scheme: "shopify", Secrets: []string{secret + "\n"}}, "secret #1 has leading or trailing whitespace"},
		{"NegativeTolerance", signature.Config{Scheme: "stripe", Secrets: []string{secret}, Tolerance: -time.Second}, "tolerance must not be negative"},
		{"SWNotBase64", signature.Config{Scheme: "standard-webhooks", Secrets: []string{good, secret}}, "secret #2 is not valid base64 after whsec_"},
		{"SWNotBase64NoPrefix", signature.Config{Scheme: "standard-webhooks", Secrets: []string{"TOP SECRET!"}},
			"secret #1 is not valid base64 (want whsec_ followed by base64)"},
		{"SWPrefixOnly", signature.Config{Scheme: "standard-webhooks", Secrets: []string{"whsec_"}}, "secret #1 is empty after whsec_"},
		// Stripe's API keys, pasted where the endpoint's signing secret goes: every
		// delivery would fail as a mismatch, and the config would hold an API key.
		{"StripeSecretKey", signature.Config{Scheme: "stripe", Secrets: []string{good, "sk_live_TOP+SECRET+VALUE!"}},
			"secret #2 is a Stripe API key (sk_live_…), not the webhook endpoint's signing secret (whsec_…)"},
		{"StripeRestrictedKey", signature.Config{Scheme: "stripe", Secrets: []string{"rk_test_TOP+SECRET+VALUE!"}}, "secret #1 is a Stripe API key (rk_test_…)"},
		{"StripePublishableKey", signature.Config{Scheme: "stripe", Secrets: []string{"pk_live_TOP+SECRET+VALUE!"}}, "secret #1 is a Stripe API key (pk_live_…)"},
		{"HMACNoHeader", signature.Config{Scheme: "hmac-sha256", Secrets: []string{secret}}, "signature_header is required for hmac-sha256"},
		{"HMACBadHeader", signature.Config{Scheme: "hmac-sha256", Header: "X Signature", Secrets: []string{secret}},
			`signature_header "X Signature" is not a valid header name`},
		{"HMACHeaderWithColon", signature.Config{Scheme: "hmac-sha256", Header: "X-Signature:", Secrets: []string{secret}}, "not a valid header name"},
		{"HMACBadEncoding", signature.Config{Scheme: "hmac-sha256", Header: "X-Sig", Encoding: "base32", Secrets: []string{secret}},
			"signature_encoding must be hex or base64"},
		{"BasicNoUser", signature.Config{Scheme: "basic-auth", Secrets: []string{secret}}, "basic_user is required"},
		{"BasicUserColon", signature.Config{Scheme: "basic-auth", BasicUser: "a:b", Secrets: []string{secret}}, "basic_user must not contain ':'"},
		{"BasicNoSecret", signature.Config{Scheme: "basic-auth", BasicUser: "ota"}, "secret is required"},
		{"TokenNeither", signature.Config{Scheme: "token", Secrets: []string{secret}}, "set exactly one of token_header and token_query"},
		{"TokenBoth", signature.Config{Scheme: "token", TokenHeader: "X-Token", TokenQuery: "token", Secrets: []string{secret}},
			"set exactly one of token_header and token_query"},
		{"TokenBadHeader", signature.Config{Scheme: "token", TokenHeader: "X-Token\r\n", Secrets: []string{secret}}, "token_header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := signature.New(tc.cfg)
			if v != nil {
				t.Errorf("got a verifier along with the error")
			}
			checkErr(t, err, tc.want, secret, good)
		})
	}
}

func TestNew_Accepts(t *testing.T) {
	for _, cfg := range []signature.Config{
		{Scheme: "none", Secrets: []string{"ignored"}},
		{Scheme: "standard-webhooks", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{Scheme: "standard-webhooks", Secrets: []string{"whsec_c2VjcmV0LW9mLWEtcm90YXRlZC1lbmRwb2ludA"}}, // unpadded
		{Scheme: "stripe", Secrets: []string{"not base64 at all: stripe keys are raw"}, Tolerance: time.Hour},
		{Scheme: "hmac-sha256", Header: "x-signature", Encoding: "hex", Secrets: []string{"s"}},
		{Scheme: "github", Secrets: []string{"s"}, Header: "ignored for github"},
	} {
		if _, err := signature.New(cfg); err != nil {
			t.Errorf("New(%+v) = %v", cfg, err)
		}
	}
}

// Every scheme that takes a secret takes its placeholder, with the other settings the
// scheme requires.
func TestPlaceholder(t *testing.T) {
	for _, scheme := range signature.Schemes {
		if scheme == "none" {
			continue
		}
		cfg := signature.Config{Scheme: scheme, Secrets: []string{signature.Placeholder(scheme)},
			Header: "X-Signature", BasicUser: "user", TokenHeader: "X-Token"}
		if _, err := signature.New(cfg); err != nil {
			t.Errorf("%s: %v", scheme, err)
		}
	}
}
