package receiver_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver"
)

// sigBenchBody is a realistic OTA cancellation, about 600 bytes.
var sigBenchBody = []byte(`{"event_id":"evt_01J9ZQ4N8T3V6W2X5Y7Z9A1B3C","type":"booking.cancelled",` +
	`"created_at":"2025-11-29T18:42:07Z","property_id":"PROP-000417","booking_id":"BK-2025-118734",` +
	`"status":"cancelled","effective_date":"2025-12-20","channel":"booking.com","guest":{"name":"A. Guest",` +
	`"country":"DE"},"stay":{"arrival":"2025-12-20","departure":"2025-12-23","nights":3,"rooms":[{"type":"DBL",` +
	`"rate_plan":"BAR-FLEX","adults":2,"children":0,"amount":{"value":"412.50","currency":"EUR"}}]},` +
	`"refund":{"amount":"412.50","currency":"EUR","reason":"guest_request","policy":"free_cancellation"},` +
	`"cancellation":{"id":"CXL-88231","requested_at":"2025-11-29T18:41:55Z","source":"guest"},"version":3}`)

func sigBenchVerify(b *testing.B, cfg receiver.SchemeConfig) {
	v := sigMustVerifier(b, cfg)
	now := time.Unix(1764441727, 0)
	h, q := http.Header{}, url.Values{}
	// Signed with the last secret, so a rotation's full cost shows.
	signer := cfg
	signer.Secrets = cfg.Secrets[len(cfg.Secrets)-1:]
	if err := sigMustVerifier(b, signer).Sign(h, q, sigBenchBody, now); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(sigBenchBody)))
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(h, q, sigBenchBody, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify_StandardWebhooks(b *testing.B) {
	sigBenchVerify(b, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigSWSecret}})
}

// During a rotation a delivery signed with the second secret costs one
// HMAC per secret.
func BenchmarkVerify_StandardWebhooksRotated(b *testing.B) {
	sigBenchVerify(b, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigOtherSecret, sigSWSecret}})
}

func BenchmarkVerify_StandardWebhooksParallel(b *testing.B) {
	v := sigMustVerifier(b, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigSWSecret}})
	now := time.Unix(1764441727, 0)
	h := http.Header{}
	if err := v.Sign(h, nil, sigBenchBody, now); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(sigBenchBody)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := v.Verify(h, nil, sigBenchBody, now); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkVerify_Stripe(b *testing.B) {
	sigBenchVerify(b, receiver.SchemeConfig{Scheme: "stripe", Secrets: []string{sigStripeSecret}})
}

func BenchmarkVerify_GitHub(b *testing.B) {
	sigBenchVerify(b, receiver.SchemeConfig{Scheme: "github", Secrets: []string{sigGitHubSecret}})
}

func BenchmarkVerify_Shopify(b *testing.B) {
	sigBenchVerify(b, receiver.SchemeConfig{Scheme: "shopify", Secrets: []string{sigShopifySecret}})
}

func BenchmarkVerify_BasicAuth(b *testing.B) {
	sigBenchVerify(b, receiver.SchemeConfig{Scheme: "basic-auth", BasicUser: "ota", Secrets: []string{"a-long-enough-password"}})
}

func BenchmarkVerify_Token(b *testing.B) {
	sigBenchVerify(b, receiver.SchemeConfig{Scheme: "token", TokenHeader: "X-Webhook-Token", Secrets: []string{"a-long-enough-token"}})
}

// Rejections are what a flood of forged deliveries costs.
func BenchmarkVerify_StandardWebhooksForged(b *testing.B) {
	v := sigMustVerifier(b, receiver.SchemeConfig{Scheme: "standard-webhooks", Secrets: []string{sigSWSecret}})
	now := time.Unix(1764441727, 0)
	h := http.Header{}
	if err := v.Sign(h, nil, sigBenchBody, now); err != nil {
		b.Fatal(err)
	}
	forged := append([]byte(nil), sigBenchBody...)
	forged[10] ^= 1
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(h, nil, forged, now); err == nil {
			b.Fatal("forged body verified")
		}
	}
}
