package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// perDecision fills the point's file-system calls per decision, in all
// (read- and write-class round trips; RELEASE and FORGET cost none) and by
// kind, from the counters loadtest read over the load alone.
func (p *point) perDecision() {
	p.OpsByKind = map[string]float64{}
	if p.Decisions == 0 {
		return
	}
	for k, n := range p.FS.Ops {
		if n > 0 {
			p.OpsByKind[k] = float64(n) / float64(p.Decisions)
		}
	}
	p.OpsPerDecison = float64(p.FS.ReadClass+p.FS.WriteClass) / float64(p.Decisions)
}

// per is n per decision.
func (p *point) per(n int64) float64 {
	if p.Decisions == 0 {
		return 0
	}
	return float64(n) / float64(p.Decisions)
}

// byKind lists the calls per decision by kind, most first.
func (p *point) byKind() string {
	kinds := make([]string, 0, len(p.OpsByKind))
	for k := range p.OpsByKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if p.OpsByKind[kinds[i]] != p.OpsByKind[kinds[j]] {
			return p.OpsByKind[kinds[i]] > p.OpsByKind[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %.1f", k, p.OpsByKind[k])
	}
	return strings.Join(parts, ", ")
}

// spread is how many times the decisions of the least busy process the
// busiest one made: 1 is even; a starved process makes it large (infinite
// when one made none).
func (p *point) spread() float64 {
	if p.MinPerProc <= 0 {
		if p.MaxPerProc == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return float64(p.MaxPerProc) / float64(p.MinPerProc)
}

// verdicts are the ways the results fail: a count that is not exact, more
// file-system calls per decision than maxCalls, a spread of decisions
// between processes wider than maxSpread (limits of 0 are off).
func verdicts(results []point, maxCalls, maxSpread float64) []string {
	var failed []string
	for _, p := range results {
		at := fmt.Sprintf("%s journal, %d procs x %d clients, %d shards", p.Journal, p.Procs, p.Clients, p.Shards)
		if !p.Exact {
			failed = append(failed, at+": counts not exact")
		}
		if maxCalls > 0 && p.OpsPerDecison > maxCalls {
			failed = append(failed, fmt.Sprintf("%s: %.1f file-system calls per decision, above %g", at, p.OpsPerDecison, maxCalls))
		}
		if maxSpread > 0 && p.spread() > maxSpread {
			failed = append(failed, fmt.Sprintf("%s: per-process decisions %d..%d, a spread above %gx", at, p.MinPerProc, p.MaxPerProc, maxSpread))
		}
	}
	return failed
}
