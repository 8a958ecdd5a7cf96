package main

import (
	"runtime/debug"
	"strconv"
)

// gcPercent is the garbage collector's target the server runs with when
// GOGC is not set: a collection when the heap has grown by four times what
// was live after the last, not by once (Go's default, 100).
//
// The server's live heap is small (its statements, its buffers, the
// requests in flight), while every decision allocates its request, its
// log line and its statements' arguments: at Go's default the collector
// took 15 to 20% of the server's CPU under the peer comparison's load,
// and 400 gave it back as throughput (+10%, BENCHMARKS.md, "Against a
// peer") for about 12 MB more resident memory (29 MB to 41 MB under that
// load). GOGC, when set, is the runtime's and is left alone.
const gcPercent = 400

// tuneGC sets the collector's target to gcPercent unless getenv gives
// GOGC, and reports whether it did.
func tuneGC(getenv func(string) string) bool {
	if getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(gcPercent)
	return true
}

// gcTarget says, for -check, which target tuneGC leaves the collector
// with under getenv.
func gcTarget(getenv func(string) string) string {
	if v := getenv("GOGC"); v != "" {
		return "GOGC=" + v + " (from GOGC)"
	}
	return "GOGC=" + strconv.Itoa(gcPercent) + " (the server's own; GOGC sets another)"
}
