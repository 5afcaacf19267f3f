package receiver

import (
	"testing"
	"time"
)

// TestBackoff_NeverPastMaxBackoff: the jitter of ±20 % applies before the cap, so that a
// key whose waits have reached max_backoff waits at most that long, as the configuration
// documents ("never longer than this"), and one below it doubles as it should.
func TestBackoff_NeverPastMaxBackoff(t *testing.T) {
	const first, most = time.Second, 10 * time.Minute
	for n := 1; n <= 20; n++ {
		plain := first << min(n-1, 20)
		for range 200 {
			b := backoff(n, first, most)
			if b > most {
				t.Fatalf("wait after %d failed attempts: %v, past max_backoff %v", n, b, most)
			}
			if low := time.Duration(float64(min(plain, most)) * 0.8); b < low {
				t.Fatalf("wait after %d failed attempts: %v, under %v", n, b, low)
			}
		}
	}
}
