package main

import (
	"runtime/debug"
	"testing"
)

// TestTuneServeGC raises serve's GC target when GOGC is unset and leaves an operator's
// GOGC alone.
func TestTuneServeGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)

	tuneServeGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != serveGCPercent {
		t.Errorf("GOGC unset: GC percent %d, want %d", got, serveGCPercent)
	}
	tuneServeGC(func(name string) string {
		if name == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=50 set: GC percent changed to %d, want it left at 100", got)
	}
}
