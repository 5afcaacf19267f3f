package signature_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// The parsers read attacker-controlled headers before anything is
// authenticated: they must never panic, and nothing but the true signature
// may verify.

func FuzzVerifyStandardWebhooks(f *testing.F) {
	f.Add(swID, swTimestamp, swSignature, []byte(swBody))
	f.Add(swID, swTimestamp, "v1a,abc v2,"+swSignature[3:]+" v1,"+strings.Repeat("A", 43)+"=", []byte("{}"))
	f.Add("", "-1", "v1", []byte(nil))
	f.Add("msg_1", "99999999999999999999", "v1,,,, , v1,=", []byte("x"))
	f.Add("msg_1", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", []byte(swBody))

	secrets := []string{swSecret, otherSecret}
	v := mustVerifier(f, signature.Config{Scheme: "standard-webhooks", Secrets: secrets})
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		// Stay inside the tolerance whenever ts parses, so the fuzzer
		// reaches the signature check instead of stopping at the clock.
		now := unixTime(swTimestamp)
		if n, err := strconv.ParseInt(ts, 10, 64); err == nil && n > 0 && n < 1<<40 {
			now = time.Unix(n, 0)
		}
		err := v.Verify(h, nil, body, now)
		if err == nil {
			genuine := false
			for _, s := range secrets {
				want := swSign(s, id, ts, string(body))
				// Up to the last character, whose low bits a lenient
				// base64 decoder ignores.
				genuine = genuine || strings.Contains(sig, "v1,"+want[3:3+42])
			}
			if !genuine {
				t.Fatalf("forged delivery verified: id %q ts %q sig %q body %q", id, ts, sig, body)
			}
		}
		if err != nil && leakPattern.MatchString(err.Error()) {
			t.Fatalf("error %q looks like it carries a signature", err)
		}
	})
}

func FuzzVerifyStripe(f *testing.F) {
	f.Add("t="+stripeTimestamp+",v1="+stripeV1, []byte(stripeBody))
	f.Add("t="+stripeTimestamp+",v1=bad,v0="+stripeV1+",v1="+strings.ToUpper(stripeV1), []byte(stripeBody))
	f.Add("t=,t=1,v1=", []byte(nil))
	f.Add("v1,t=1", []byte("{}"))
	f.Add(",,,=,==,t=99999999999999999999", []byte("x"))

	secrets := []string{stripeSecret, "whsec_other"}
	v := mustVerifier(f, signature.Config{Scheme: "stripe", Secrets: secrets})
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		h := http.Header{}
		h.Set("Stripe-Signature", header)
		now, ts := unixTime(stripeTimestamp), ""
		// The timestamp is the element whose key is exactly "t" (a key such as "1t" is
		// another, ignored element).
		for _, part := range strings.Split(header, ",") {
			if after, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
				ts = after[:len(after)-len(strings.TrimLeft(after, "0123456789"))]
				if n, err := strconv.ParseInt(ts, 10, 64); err == nil && n < 1<<40 {
					now = time.Unix(n, 0)
				}
				break
			}
		}
		err := v.Verify(h, nil, body, now)
		if err == nil {
			genuine := false
			for _, s := range secrets {
				genuine = genuine || strings.Contains(strings.ToLower(header), "v1="+stripeSign(s, ts, string(body)))
			}
			if !genuine {
				t.Fatalf("forged delivery verified: header %q body %q", header, body)
			}
		}
		if err != nil && leakPattern.MatchString(err.Error()) {
			t.Fatalf("error %q looks like it carries a signature", err)
		}
	})
}
