//go:build !race

package signature_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// The intake path runs Verify on every delivery; it should not feed the
// garbage collector. (Excluded under -race, whose sync.Pool drops items at
// random on purpose.)
func TestVerify_NoAllocs(t *testing.T) {
	now := time.Unix(1764441727, 0)
	for scheme, cfg := range schemeConfigs() {
		v := mustVerifier(t, cfg)
		h, q := http.Header{}, url.Values{}
		if err := v.Sign(h, q, benchBody, now); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if err := v.Verify(h, q, benchBody, now); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: Verify allocates %v times per call, want 0", scheme, allocs)
		}
	}
}

// TestVerifyTimestamp_NoAllocs: saying when a delivery was signed costs the intake path
// no allocation either.
func TestVerifyTimestamp_NoAllocs(t *testing.T) {
	now := time.Unix(1764441727, 0)
	for scheme, cfg := range schemeConfigs() {
		tv, ok := mustVerifier(t, cfg).(signature.TimestampVerifier)
		if !ok {
			continue
		}
		h, q := http.Header{}, url.Values{}
		if err := tv.Sign(h, q, benchBody, now.Add(-2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if signed, err := tv.VerifyTimestamp(h, q, benchBody, now); err != nil || signed.IsZero() {
				t.Fatal(signed, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: VerifyTimestamp allocates %v times per call, want 0", scheme, allocs)
		}
	}
}
