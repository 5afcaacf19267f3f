package signature_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/receiver/signature"
)

// TestVerifyTimestamp: the timestamped schemes say when an authentic delivery was
// signed, also when it is refused for being off in time, and never for a delivery that
// no secret signed, whatever its timestamp; the other schemes have no timestamp to say.
func TestVerifyTimestamp(t *testing.T) {
	body := []byte(`{"event_id":"evt_1","booking_id":"B-42","status":"cancelled"}`)
	now := time.Unix(1767225600, 0)
	for scheme, cfg := range schemeConfigs() {
		v := mustVerifier(t, cfg)
		tv, ok := v.(signature.TimestampVerifier)
		if ok != v.Timestamped() {
			t.Errorf("%s: a TimestampVerifier %v, Timestamped %v", scheme, ok, v.Timestamped())
		}
		if !ok {
			continue
		}
		t.Run(scheme, func(t *testing.T) {
			for _, tc := range []struct {
				name   string
				signed time.Duration // when it was signed, from now
				forged bool
				late   bool // refused for its time
			}{
				{"Ahead", 2 * time.Minute, false, false},
				{"Behind", -3 * time.Minute, false, false},
				{"TooFarAhead", 10 * time.Minute, false, true},
				{"TooFarBehind", -time.Hour, false, true},
				{"Forged", time.Minute, true, false},
				{"ForgedAndOff", 10 * time.Minute, true, true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					h, q := http.Header{}, url.Values{}
					at := now.Add(tc.signed)
					if err := v.Sign(h, q, body, at); err != nil {
						t.Fatal(err)
					}
					b := body
					if tc.forged {
						b = slices.Clone(body)
						b[len(b)-2] = 'X'
					}
					signed, err := tv.VerifyTimestamp(h, q, b, now)
					if verr := v.Verify(h, q, b, now); (verr == nil) != (err == nil) || verr != nil && verr.Error() != err.Error() {
						t.Errorf("Verify says %v, VerifyTimestamp %v", verr, err)
					}
					switch {
					case tc.late && (err == nil || !strings.Contains(err.Error(), "outside tolerance")):
						t.Errorf("err = %v, want one about the tolerance", err)
					case tc.forged && !tc.late && err == nil:
						t.Error("a forged delivery verified")
					case !tc.forged && !tc.late && err != nil:
						t.Errorf("err = %v", err)
					}
					want := at
					if tc.forged {
						want = time.Time{}
					}
					if !signed.Equal(want) {
						t.Errorf("signed = %v, want %v", signed, want)
					}
				})
			}
		})
	}
}
