package main

import (
	"net/http"
	"runtime/debug"
	"testing"
)

// TestServe_GCTarget: serve collects garbage at its own target (its live heap is small,
// and Go's default collects it every few hundred deliveries under load), as /metrics
// reports it, unless the environment's GOGC says otherwise.
func TestServe_GCTarget(t *testing.T) {
	const token = "gc-target-metrics-token-7d1e"
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	for _, c := range []struct {
		name, gogc, want string
		before           int
	}{
		{"Default", "", "go_gc_gogc_percent 400\n", 100},
		{"GOGC", "150", "go_gc_gogc_percent 150\n", 150}, // the runtime has read it: serve leaves it
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetGCPercent(c.before)
			vars := map[string]string{"HOOKDEDUP_METRICS_TOKEN": token}
			if c.gogc != "" {
				vars["GOGC"] = c.gogc
			}
			s := runServeInProcess(t, `addr = "127.0.0.1:0"`+"\n"+openSource, vars)
			expect(t, "GET", s.p.public.url()+"/metrics", token, http.StatusOK, c.want)
			s.stop()
		})
	}
}
