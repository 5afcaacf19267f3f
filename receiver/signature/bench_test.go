package signature_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// benchBody is a realistic OTA cancellation, about 600 bytes.
var benchBody = []byte(`{"event_id":"evt_01J9ZQ4N8T3V6W2X5Y7Z9A1B3C","type":"booking.cancelled",` +
	`"created_at":"2025-11-29T18:42:07Z","property_id":"PROP-000417","booking_id":"BK-2025-118734",` +
	`"status":"cancelled","effective_date":"2025-12-20","channel":"booking.com","guest":{"name":"A. Guest",` +
	`"country":"DE"},"stay":{"arrival":"2025-12-20","departure":"2025-12-23","nights":3,"rooms":[{"type":"DBL",` +
	`"rate_plan":"BAR-FLEX","adults":2,"children":0,"amount":{"value":"412.50","currency":"EUR"}}]},` +
	`"refund":{"amount":"412.50","currency":"EUR","reason":"guest_request","policy":"free_cancellation"},` +
	`"cancellation":{"id":"CXL-88231","requested_at":"2025-11-29T18:41:55Z","source":"guest"},"version":3}`)

func benchVerify(b *testing.B, cfg signature.Config) {
	v := mustVerifier(b, cfg)
	now := time.Unix(1764441727, 0)
	h, q := http.Header{}, url.Values{}
	// Signed with the last secret, so a rotation's full cost shows.
	signer := cfg
	signer.Secrets = cfg.Secrets[len(cfg.Secrets)-1:]
	if err := mustVerifier(b, signer).Sign(h, q, benchBody, now); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(h, q, benchBody, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify_StandardWebhooks(b *testing.B) {
	benchVerify(b, signature.Config{Scheme: "standard-webhooks", Secrets: []string{swSecret}})
}

// During a rotation a delivery signed with the second secret costs one
// HMAC per secret.
func BenchmarkVerify_StandardWebhooksRotated(b *testing.B) {
	benchVerify(b, signature.Config{Scheme: "standard-webhooks", Secrets: []string{otherSecret, swSecret}})
}

func BenchmarkVerify_StandardWebhooksParallel(b *testing.B) {
	v := mustVerifier(b, signature.Config{Scheme: "standard-webhooks", Secrets: []string{swSecret}})
	now := time.Unix(1764441727, 0)
	h := http.Header{}
	if err := v.Sign(h, nil, benchBody, now); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := v.Verify(h, nil, benchBody, now); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkVerify_Stripe(b *testing.B) {
	benchVerify(b, signature.Config{Scheme: "stripe", Secrets: []string{stripeSecret}})
}

func BenchmarkVerify_GitHub(b *testing.B) {
	benchVerify(b, signature.Config{Scheme: "github", Secrets: []string{githubSecret}})
}

func BenchmarkVerify_Shopify(b *testing.B) {
	benchVerify(b, signature.Config{Scheme: "shopify", Secrets: []string{shopifySecret}})
}

func BenchmarkVerify_BasicAuth(b *testing.B) {
	benchVerify(b, signature.Config{Scheme: "basic-auth", BasicUser: "ota", Secrets: []string{"a-long-enough-password"}})
}

func BenchmarkVerify_Token(b *testing.B) {
	benchVerify(b, signature.Config{Scheme: "token", TokenHeader: "X-Webhook-Token", Secrets: []string{"a-long-enough-token"}})
}

// Rejections are what a flood of forged deliveries costs.
func BenchmarkVerify_StandardWebhooksForged(b *testing.B) {
	v := mustVerifier(b, signature.Config{Scheme: "standard-webhooks", Secrets: []string{swSecret}})
	now := time.Unix(1764441727, 0)
	h := http.Header{}
	if err := v.Sign(h, nil, benchBody, now); err != nil {
		b.Fatal(err)
	}
	forged := append([]byte(nil), benchBody...)
	forged[10] ^= 1
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(h, nil, forged, now); err == nil {
			b.Fatal("forged body verified")
		}
	}
}
