//go:build !race

package signature_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"
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
