package receiver

import (
	"fmt"
	"testing"
	"time"
)

// TestSkewWindow_MedianWeighsEveryDelivery: ClockSkew is the median over every
// authentic delivery of the last hour, each signed message counted once. A burst of
// 1000 distinct deliveries in one minute, all showing this clock 10 minutes behind,
// against 40 deliveries in time spread one a minute over the rest of the hour: 1000
// of 1040 deliveries say the clock is off, so the median is 10 minutes. The window
// keeps at most skewSamples a minute: each sample weighs its minute's count over the
// sample's size, or the busy minute would weigh as much as 32 quiet ones.
func TestSkewWindow_MedianWeighsEveryDelivery(t *testing.T) {
	var w skewWindow
	now := time.Unix(1_800_000_000, 0).Truncate(time.Minute)
	off := 10 * time.Minute
	burst := now.Add(-30 * time.Second)
	for i := range 1000 {
		w.observe("a", burst.Add(off), []byte(fmt.Sprintf(`{"n":%d}`, i)), off, burst)
	}
	for i := range 40 {
		at := now.Add(-time.Duration(i+1) * time.Minute)
		w.observe("b", at, []byte(fmt.Sprintf(`{"m":%d}`, i)), 0, at)
	}
	median, n := w.median(now)
	if n != 1040 {
		t.Fatalf("n = %d, want 1040", n)
	}
	if median != off {
		t.Errorf("median = %s over %d deliveries, 1000 of which are %s off; want %s: the busy minute's deliveries count only as its %d samples",
			median, n, off, off, skewSamples)
	}
}
