package main

import (
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
)

// The server collects garbage at gcPercent unless GOGC says otherwise, in
// which case the runtime's reading of GOGC stands. (Not parallel: the
// target is the process's.)
func TestTheServerSetsTheGCTargetUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	if !tuneGC(func(string) string { return "" }) {
		t.Error("GOGC unset: the target was not set")
	}
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC unset: the target is %d, want %d", got, gcPercent)
	}

	if tuneGC(func(k string) string { return map[string]string{"GOGC": "50"}[k] }) {
		t.Error("GOGC=50: the server set the target over it")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=50: the target is %d, want the runtime's own (100 here)", got)
	}
}

// -check names the target the server would run with: its own, or GOGC's.
func TestCheckSaysWhichGCTargetTheServerRunsWith(t *testing.T) {
	t.Parallel()
	_, out := checkOut(map[string]string{"GOGC": "50"})
	if !strings.Contains(out, "gc target: GOGC=50 (from GOGC)\n") {
		t.Errorf("GOGC=50: -check said\n%s", out)
	}
	_, out = checkOut(map[string]string{})
	if !strings.Contains(out, "gc target: GOGC=400 (the server's own; GOGC sets another)\n") {
		t.Errorf("GOGC unset: -check said\n%s", out)
	}
	_, out = checkOut(map[string]string{"GOGC": "off"})
	if !strings.Contains(out, "gc target: GOGC=off (from GOGC)\n") {
		t.Errorf("GOGC=off: -check said\n%s", out)
	}
	// A GOGC the runtime cannot read leaves Go's default, 100, which the
	// server does not override (GOGC is set): -check used to say
	// "GOGC=abc (from GOGC)", a target nothing runs with.
	for _, v := range []string{"abc", "50%", "OFF", "1e3"} {
		_, out = checkOut(map[string]string{"GOGC": v})
		if want := fmt.Sprintf("gc target: GOGC=100 (Go's default: GOGC=%q is neither a whole number nor off)\n", v); !strings.Contains(out, want) {
			t.Errorf("GOGC=%s: -check said\n%s\nwant %q", v, out, want)
		}
	}
}
