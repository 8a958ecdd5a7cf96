// Package longtest says whether this test binary was built with the
// longtests build tag, which .ci/run sets: then the tests that repeat a
// random trial (kill -9 rounds, contended runs) run every round they were
// written with; without it, a plain `go test ./...` runs fewer, asserting
// the same properties, so that it stays quick on a laptop. A shortened test
// says so in its log (Rounds), so that a reader of -v output knows which
// was run. Under the tag the tests that contend for locks run one at a
// time, as they did before they ran side by side (Parallel).
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

// Parallel is t.Parallel, but under the longtests tag, where the test runs
// alone: CI runs these tests, which start processes that contend for one
// file's locks within a busy timeout, with all their rounds under -race,
// and side by side they starved each other past it (a prune's 5 s,
// TestPruneDuringCrossShardCommitsRemovesNoLiveSuperJournal, seen once).
func Parallel(t *testing.T) {
	t.Helper()
	if !On {
		t.Parallel()
	}
}
