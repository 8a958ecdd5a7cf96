// Package longtest says whether this test binary was built with the
// longtests build tag, which .ci/run sets: then the tests that repeat a
// random trial (kill -9 rounds, contended runs) run every round they were
// written with; without it, a plain `go test ./...` runs fewer, asserting
// the same properties, so that it stays quick on a laptop. A shortened test
// says so in its log (Rounds), so that a reader of -v output knows which
// was run.
package longtest

import "testing"

// Rounds is long under the longtests tag and short without, logging which
// it picked when they differ.
func Rounds(tb testing.TB, short, long int) int {
	tb.Helper()
	if On || short == long {
		return long
	}
	tb.Logf("shortened: %d rounds of %d (go test -tags longtests runs all)", short, long)
	return short
}
