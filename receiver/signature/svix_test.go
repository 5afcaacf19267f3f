package signature_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// Svix's own libraries accept svix-id, svix-timestamp and svix-signature as well as the
// webhook-* names, and senders built on Svix send them: the same signature under the
// older names verifies.
func TestVerify_StandardWebhooks_SvixHeaders(t *testing.T) {
	v := mustVerifier(t, signature.Config{Scheme: "standard-webhooks", Secrets: []string{swSecret}})
	now := unixTime(swTimestamp).Add(10 * time.Second)
	svix := func(id, ts, sig string) http.Header {
		h := http.Header{}
		for name, value := range map[string]string{"svix-id": id, "svix-timestamp": ts, "svix-signature": sig} {
			if value != "" {
				h.Set(name, value)
			}
		}
		return h
	}
	both := svix(swID, swTimestamp, swSignature)
	both.Set("webhook-id", swID)
	both.Set("webhook-timestamp", swTimestamp)
	both.Set("webhook-signature", swSignature)
	// A forged svix-signature beside a valid set of webhook-* headers: the webhook-*
	// headers are read, whole, never a mix of the two.
	mixed := both.Clone()
	mixed.Set("svix-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
	mixed.Del("webhook-signature")

	runCases(t, v, []verifyCase{
		{name: "Vector", header: svix(swID, swTimestamp, swSignature), body: swBody, now: now},
		{name: "BothFamilies", header: both, body: swBody, now: now},
		{name: "Tampered", header: svix(swID, swTimestamp, swSignature), body: `{"test": 2432232315}`, now: now,
			want: "signature does not match any secret"},
		{name: "MissingID", header: svix("", swTimestamp, swSignature), body: swBody, now: now, want: "missing header svix-id"},
		{name: "MissingTimestamp", header: svix(swID, "", swSignature), body: swBody, now: now, want: "missing header svix-timestamp"},
		{name: "MissingSignature", header: svix(swID, swTimestamp, ""), body: swBody, now: now, want: "missing header svix-signature"},
		{name: "Stale", header: svix(swID, swTimestamp, swSignature), body: swBody, now: now.Add(time.Hour), want: "in the past"},
		{name: "NotMixed", header: mixed, body: swBody, now: now, want: "missing header webhook-signature"},
	})
}

// TestIDHeaderOf: under standard-webhooks, an event id configured as either spelling of
// the message id is read from the family of headers Verify checks, never from the other;
// under shopify, Shopify's headers are read in the spelling of the delivery's family.
func TestIDHeaderOf(t *testing.T) {
	both := http.Header{"Webhook-Id": {"msg_signed"}, "Webhook-Timestamp": {"1"}, "Webhook-Signature": {"v1,x"},
		"Svix-Id": {"msg_forged"}}
	svixOnly := http.Header{"Svix-Id": {"msg_1"}, "Svix-Timestamp": {"1"}, "Svix-Signature": {"v1,x"}}
	// A delivery of Shopify's Events is signed in Shopify-Hmac-Sha256, a webhook's in
	// X-Shopify-Hmac-Sha256; one with both is read as a webhook's.
	events := http.Header{"Shopify-Hmac-Sha256": {"x"}, "Shopify-Webhook-Id": {"d1"}}
	webhook := http.Header{"X-Shopify-Hmac-Sha256": {"x"}, "X-Shopify-Webhook-Id": {"d1"}}
	shopifyBoth := http.Header{"X-Shopify-Hmac-Sha256": {"x"}, "Shopify-Hmac-Sha256": {"x"}}
	for _, tc := range []struct {
		scheme, name string
		h            http.Header
		want         string
	}{
		{"standard-webhooks", "svix-id", both, "webhook-id"},
		{"standard-webhooks", "webhook-id", both, "webhook-id"},
		{"standard-webhooks", "SVIX-ID", svixOnly, "svix-id"},
		{"standard-webhooks", "webhook-id", svixOnly, "svix-id"},
		{"standard-webhooks", "X-GitHub-Delivery", both, "X-GitHub-Delivery"},
		{"standard-webhooks", "webhook-timestamp", svixOnly, "webhook-timestamp"},
		{"shopify", "X-Shopify-Webhook-Id", events, "Shopify-Webhook-Id"},
		{"shopify", "x-shopify-event-id", events, "shopify-event-id"},
		{"shopify", "X-Shopify-Webhook-Id", webhook, "X-Shopify-Webhook-Id"},
		{"shopify", "X-Shopify-Webhook-Id", shopifyBoth, "X-Shopify-Webhook-Id"},
		{"shopify", "X-Shopify-", events, "X-Shopify-"},
		{"shopify", "X-Request-Id", events, "X-Request-Id"},
	} {
		if got := signature.IDHeaderOf(tc.scheme, tc.name, tc.h); got != tc.want {
			t.Errorf("%s: IDHeaderOf(%q) = %q, want %q", tc.scheme, tc.name, got, tc.want)
		}
	}
	// Another scheme signs no such header: the one configured is read.
	if got := signature.IDHeaderOf("hmac-sha256", "svix-id", both); got != "svix-id" {
		t.Errorf("IDHeaderOf under hmac-sha256 = %q, want svix-id as configured", got)
	}
}
