package main

import "runtime/debug"

// serveGCPercent is serve's garbage collection target (GOGC) when the environment sets
// none. Under load intake allocates a few kilobytes a delivery and keeps almost none of
// it: serve's live heap stays near 2 MB, so at Go's default of 100 it collected every
// 200 deliveries or so (5 MB goal), 2 % of its CPU. At 400 the goal is about 16 MB and
// a collection comes every 1,300 deliveries.
const serveGCPercent = 400

// tuneServeGC sets serve's garbage collection target unless GOGC (read through getenv)
// says otherwise: an operator's setting always wins.
func tuneServeGC(getenv func(string) string) {
	if getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(serveGCPercent)
}
