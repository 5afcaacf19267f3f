package receiver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
)

// The parsers read attacker-controlled headers before anything is
// authenticated: they must never panic, and nothing but the true signature
// may verify.

func FuzzVerifyStandardWebhooks(f *testing.F) {
	f.Add(sigSWID, sigSWTimestamp, sigSWSignature, []byte(sigSWBody))
	f.Add(sigSWID, sigSWTimestamp, "v1a,abc v2,"+sigSWSignature[3:]+" v1,"+strings.Repeat("A", 43)+"=", []byte("{}"))
	f.Add("", "-1", "v1", []byte(nil))
	f.Add("msg_1", "99999999999999999999", "v1,,,, , v1,=", []byte("x"))
	f.Add("msg_1", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", []byte(sigSWBody))

	secrets := []string{sigSWSecret, sigOtherSecret}
	v := sigMustVerifier(f, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: secrets})
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		// Stay inside the tolerance whenever ts parses, so the fuzzer
		// reaches the signature check instead of stopping at the clock.
		now := sigUnix(sigSWTimestamp)
		if n, err := strconv.ParseInt(ts, 10, 64); err == nil && n > 0 && n < 1<<40 {
			now = time.Unix(n, 0)
		}
		err := v.Verify(h, nil, body, now)
		if err == nil {
			genuine := false
			for _, s := range secrets {
				want := sigSWSign(s, id, ts, string(body))
				// Up to the last character, whose low bits a lenient
				// base64 decoder ignores.
				genuine = genuine || strings.Contains(sig, "v1,"+want[3:3+42])
			}
			if !genuine {
				t.Fatalf("forged delivery verified: id %q ts %q sig %q body %q", id, ts, sig, body)
			}
		}
		if err != nil && sigLeak.MatchString(err.Error()) {
			t.Fatalf("error %q looks like it carries a signature", err)
		}
	})
}

func FuzzVerifyStripe(f *testing.F) {
	f.Add("t="+sigStripeTimestamp+",v1="+sigStripeV1, []byte(sigStripeBody))
	f.Add("t="+sigStripeTimestamp+",v1=bad,v0="+sigStripeV1+",v1="+strings.ToUpper(sigStripeV1), []byte(sigStripeBody))
	f.Add("t=,t=1,v1=", []byte(nil))
	f.Add("v1,t=1", []byte("{}"))
	f.Add(",,,=,==,t=99999999999999999999", []byte("x"))

	secrets := []string{sigStripeSecret, "whsec_other"}
	v := sigMustVerifier(f, receiver.SchemeConfig{Scheme: "stripe", Secrets: secrets})
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		h := http.Header{}
		h.Set("Stripe-Signature", header)
		now, ts := sigUnix(sigStripeTimestamp), ""
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
				genuine = genuine || strings.Contains(strings.ToLower(header), "v1="+sigStripeSign(s, ts, string(body)))
			}
			if !genuine {
				t.Fatalf("forged delivery verified: header %q body %q", header, body)
			}
		}
		if err != nil && sigLeak.MatchString(err.Error()) {
			t.Fatalf("error %q looks like it carries a signature", err)
		}
	})
}
