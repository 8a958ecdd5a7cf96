package main

import (
	"strings"
	"testing"
)

// TestVerdicts: a sweep fails on a count that is not exact, and with limits
// on more calls per decision or a wider spread between processes than
// they allow, each named in its message; at or under them it passes.
func TestVerdicts(t *testing.T) {
	ok := point{Journal: "TRUNCATE", Procs: 16, Clients: 1, Shards: 64, Exact: true, OpsPerDecison: 60, MinPerProc: 50, MaxPerProc: 100}
	for _, tc := range []struct {
		name   string
		change func(*point)
		want   string // in the one failure; "" for none
	}{
		{"at the limits", func(*point) {}, ""},
		{"a call above", func(p *point) { p.OpsPerDecison = 60.1 }, "60.1 file-system calls per decision, above 60"},
		{"a spread above", func(p *point) { p.MinPerProc = 49 }, "per-process decisions 49..100"},
		{"a starved process", func(p *point) { p.MinPerProc = 0 }, "per-process decisions 0..100"},
		{"not exact", func(p *point) { p.Exact = false }, "counts not exact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.change(&p)
			got := verdicts([]point{p}, 60, 2)
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("failed: %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "TRUNCATE journal, 16 procs x 1 clients, 64 shards")):
				t.Errorf("failures %q, want one saying %q", got, tc.want)
			}
		})
	}
	// Without limits only inexact counts fail.
	p := ok
	p.OpsPerDecison, p.MinPerProc = 500, 1
	if got := verdicts([]point{p}, 0, 0); len(got) != 0 {
		t.Errorf("without limits: %q", got)
	}
}
