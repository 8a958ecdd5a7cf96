package main

import (
	"runtime/debug"
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
