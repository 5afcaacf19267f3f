package signature_test

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// The body-HMAC and shared-secret parsers, fuzzed like FuzzVerifyStandardWebhooks and
// FuzzVerifyStripe: never a panic, nothing but a genuine credential verifies, and no
// error text that looks like a signature. Each oracle decodes what was sent on its own,
// as the provider's documents describe, and compares bytes.

// cutFold cuts prefix from s, ignoring its case.
func cutFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

// base64Decodings returns every way sig decodes as base64 in the given alphabets.
func base64Decodings(sig string, encs ...*base64.Encoding) [][]byte {
	var out [][]byte
	for _, enc := range encs {
		if b, err := enc.DecodeString(sig); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// fuzzBodyHMAC fuzzes one body-HMAC verifier, whose signature comes in header after
// prefix; decode returns the digests what follows the prefix stands for.
func fuzzBodyHMAC(f *testing.F, cfg signature.Config, header, prefix string, decode func(string) [][]byte) {
	v := mustVerifier(f, cfg)
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{}
		h.Set(header, sig)
		err := v.Verify(h, nil, body, time.Now())
		if err == nil {
			rest, ok := cutFold(sig, prefix)
			genuine := false
			for _, s := range cfg.Secrets {
				want := hmacOf([]byte(s), string(body))
				for _, got := range decode(rest) {
					genuine = genuine || (ok && hmac.Equal(got, want))
				}
			}
			if !genuine {
				t.Fatalf("forged delivery verified: %s %q body %q", header, sig, body)
			}
		}
		if err != nil && leakPattern.MatchString(err.Error()) {
			t.Fatalf("error %q looks like it carries a signature", err)
		}
	})
}

func hexDecodings(s string) [][]byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil
	}
	return [][]byte{b}
}

func FuzzVerifyGitHub(f *testing.F) {
	f.Add(githubSignature, []byte(githubBody))
	f.Add(strings.ToUpper(githubSignature), []byte(githubBody))
	f.Add("sha1=757107ea0eb2509fc211221cce984b8a37570b6d", []byte(githubBody))
	f.Add("sha256=", []byte(nil))
	f.Add("sha256="+strings.Repeat("g", 64), []byte("{}"))
	f.Add("sha256= 757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", []byte(githubBody))
	fuzzBodyHMAC(f, signature.Config{Scheme: "github", Secrets: []string{githubSecret, "rotated-secret"}},
		"X-Hub-Signature-256", "sha256=", hexDecodings)
}

func FuzzVerifyShopify(f *testing.F) {
	f.Add(shopifyBase64, []byte(shopifyBody))
	f.Add(strings.TrimSuffix(shopifyBase64, "="), []byte(shopifyBody))
	f.Add(strings.NewReplacer("+", "-", "/", "_").Replace(shopifyBase64), []byte(shopifyBody))
	f.Add(shopifyHex, []byte(shopifyBody))
	f.Add("====", []byte(nil))
	f.Add(strings.Repeat("A", 44), []byte("{}"))
	fuzzBodyHMAC(f, signature.Config{Scheme: "shopify", Secrets: []string{shopifySecret, "rotated-secret"}},
		"X-Shopify-Hmac-Sha256", "", func(s string) [][]byte {
			return base64Decodings(s, base64.StdEncoding, base64.RawStdEncoding)
		})
}

func FuzzVerifyHMACSHA256Hex(f *testing.F) {
	f.Add("sha256="+shopifyHex, []byte(shopifyBody))
	f.Add("SHA256="+strings.ToUpper(shopifyHex), []byte(shopifyBody))
	f.Add(shopifyHex, []byte(shopifyBody))
	f.Add("sha256=sha256="+shopifyHex, []byte(shopifyBody))
	f.Add("sha256", []byte(nil))
	fuzzBodyHMAC(f, signature.Config{Scheme: "hmac-sha256", Secrets: []string{shopifySecret, "rotated-secret"},
		Header: "X-Signature", Encoding: "hex", Prefix: "sha256="}, "X-Signature", "sha256=", hexDecodings)
}

func FuzzVerifyHMACSHA256Base64(f *testing.F) {
	f.Add(shopifyBase64, []byte(shopifyBody))
	f.Add(strings.NewReplacer("+", "-", "/", "_", "=", "").Replace(shopifyBase64), []byte(shopifyBody))
	f.Add(strings.Replace(shopifyBase64, "+", "-", 1), []byte(shopifyBody)) // alphabets mixed
	f.Add("", []byte(nil))
	fuzzBodyHMAC(f, signature.Config{Scheme: "hmac-sha256", Secrets: []string{shopifySecret, "rotated-secret"},
		Header: "X-Signature", Encoding: "base64"}, "X-Signature", "", func(s string) [][]byte {
		return base64Decodings(s, base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding)
	})
}

func FuzzVerifyBasicAuth(f *testing.F) {
	const user = "hostaway"
	secrets := []string{"s3cret-pass", "old:pass:with:colons"}
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	f.Add(basic(user + ":" + secrets[0]))
	f.Add(basic(user + ":" + secrets[1]))
	f.Add("basic    " + base64.StdEncoding.EncodeToString([]byte(user+":"+secrets[0])))
	f.Add(basic(user + "x:" + secrets[0]))
	f.Add(basic(user))
	f.Add(basic(":"))
	f.Add("Basic " + strings.Repeat("=", 5000))
	f.Add("Bearer " + secrets[0])
	f.Add("Basic !!!!")
	v := mustVerifier(f, signature.Config{Scheme: "basic-auth", BasicUser: user, Secrets: secrets})
	f.Fuzz(func(t *testing.T, authorization string) {
		h := http.Header{}
		h.Set("Authorization", authorization)
		err := v.Verify(h, nil, nil, time.Now())
		if err == nil {
			rest, ok := cutFold(authorization, "Basic ")
			creds, derr := base64.StdEncoding.DecodeString(strings.TrimLeft(rest, " "))
			u, p, found := bytes.Cut(creds, []byte{':'})
			genuine := ok && derr == nil && found && string(u) == user && (string(p) == secrets[0] || string(p) == secrets[1])
			if !genuine {
				t.Fatalf("forged credentials verified: %q", authorization)
			}
		}
		if err != nil {
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error %q carries a secret", err)
				}
			}
		}
	})
}

func FuzzVerifyToken(f *testing.F) {
	secrets := []string{"tok_live_0123456789", "tok_old"}
	f.Add(secrets[0], "token="+secrets[0])
	f.Add(secrets[1], "token="+secrets[1]+"&token=x")
	f.Add(" "+secrets[0], "token=x&token="+secrets[0])
	f.Add(strings.ToUpper(secrets[0]), "token=%74ok_old")
	f.Add("", "token")
	f.Add(strings.Repeat("t", 5000), "token="+strings.Repeat("t", 5000))
	byHeader := mustVerifier(f, signature.Config{Scheme: "token", TokenHeader: "X-Webhook-Token", Secrets: secrets})
	byQuery := mustVerifier(f, signature.Config{Scheme: "token", TokenQuery: "token", Secrets: secrets})
	f.Fuzz(func(t *testing.T, header, rawQuery string) {
		h := http.Header{}
		h.Set("X-Webhook-Token", header)
		if err := byHeader.Verify(h, nil, nil, time.Now()); err == nil && h.Get("X-Webhook-Token") != secrets[0] && h.Get("X-Webhook-Token") != secrets[1] {
			t.Fatalf("forged header token verified: %q", header)
		}
		q, _ := url.ParseQuery(rawQuery)
		if err := byQuery.Verify(nil, q, nil, time.Now()); err == nil && q.Get("token") != secrets[0] && q.Get("token") != secrets[1] {
			t.Fatalf("forged query token verified: %q", rawQuery)
		} else if err != nil && (strings.Contains(err.Error(), secrets[0]) || strings.Contains(err.Error(), "tok_old")) {
			t.Fatalf("error %q carries a secret", err)
		}
	})
}
