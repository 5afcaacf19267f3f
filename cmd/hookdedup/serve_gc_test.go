package main

import (
	"math"
	"net/http"
	"runtime/debug"
	"testing"
)

// TestServe_GCTarget: serve collects garbage at its own target (its live heap is small,
// and Go's default collects it every few hundred deliveries under load), under a soft
// memory limit that bounds what that target costs in a burst of large bodies, as
// /metrics reports them, unless the environment's GOGC or GOMEMLIMIT says otherwise.
func TestServe_GCTarget(t *testing.T) {
	const token = "gc-target-metrics-token-7d1e"
	prev, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prev); debug.SetMemoryLimit(prevLimit) })
	for _, c := range []struct {
		name, gogc, gomemlimit string
		wants                  []string
		before, beforeLimit    int64
	}{
		{"Default", "", "", []string{"go_gc_gogc_percent 400\n", "go_gc_gomemlimit_bytes 5.36870912e+08\n"}, 100, math.MaxInt64},
		// The runtime has read them: serve leaves them.
		{"GOGC", "150", "", []string{"go_gc_gogc_percent 150\n", "go_gc_gomemlimit_bytes 5.36870912e+08\n"}, 150, math.MaxInt64},
		{"GOMEMLIMIT", "", "1GiB", []string{"go_gc_gogc_percent 400\n", "go_gc_gomemlimit_bytes 1.073741824e+09\n"}, 100, 1 << 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetGCPercent(int(c.before))
			debug.SetMemoryLimit(c.beforeLimit)
			vars := map[string]string{"HOOKDEDUP_METRICS_TOKEN": token}
			if c.gogc != "" {
				vars["GOGC"] = c.gogc
			}
			if c.gomemlimit != "" {
				vars["GOMEMLIMIT"] = c.gomemlimit
			}
			s := runServeInProcess(t, `addr = "127.0.0.1:0"`+"\n"+openSource, vars)
			for _, want := range c.wants {
				expect(t, "GET", s.p.public.url()+"/metrics", token, http.StatusOK, want)
			}
			s.stop()
		})
	}
}
