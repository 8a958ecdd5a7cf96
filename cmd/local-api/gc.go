package main

import (
	"fmt"
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
// with under getenv. A GOGC the runtime cannot read (it takes "off" or a
// whole number, and anything else as unset) leaves Go's default, 100:
// GOGC is set, so tuneGC does not set the server's.
func gcTarget(getenv func(string) string) string {
	if v := getenv("GOGC"); v != "" {
		if _, err := strconv.ParseInt(v, 10, 32); err != nil && v != "off" {
			return fmt.Sprintf("GOGC=100 (Go's default: GOGC=%q is neither a whole number nor off)", v)
		}
		return "GOGC=" + v + " (from GOGC)"
	}
	return "GOGC=" + strconv.Itoa(gcPercent) + " (the server's own; GOGC sets another)"
}
