package sqlite

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// TestABatchDecidesInBulkAsOneByOneOnOddWindows is
// TestABatchDecidesInBulkAsOneByOne where bulkRun's telling windows apart
// is hardest: windows of 1.5 s, 1.9 s, 7 s, 13 s and 59 s (which share a
// start second with windows of other lengths, or with a window of the same
// length of the other kind in the same namespace), instants near 1970 and
// 2160 and in a zone that is not UTC, clocks going back up to 3 s between
// batches, and batches far longer than maxBulk, which split into runs.
func TestABatchDecidesInBulkAsOneByOneOnOddWindows(t *testing.T) {
	type tc struct {
		name     string
		start    time.Time
		policies []limiter.Policy
		step     int // max ms between batches
		jitter   int // ms either side within a batch
		maxBatch int
		rounds   int
	}
	sl, fx := limiter.Sliding, limiter.Fixed
	odd := []limiter.Policy{
		{Name: "s15", Namespace: "a", Limit: 5, Window: 1500 * time.Millisecond, Algorithm: sl},
		{Name: "s1", Namespace: "a", Limit: 5, Window: time.Second, Algorithm: sl},
		{Name: "s19", Namespace: "b", Limit: 5, Window: 1900 * time.Millisecond, Algorithm: sl},
		{Name: "f15", Namespace: "c", Limit: 3, Window: 1500 * time.Millisecond, Algorithm: fx},
		{Name: "f1", Namespace: "c", Limit: 3, Window: time.Second, Algorithm: fx},
		{Name: "s7", Namespace: "d", Limit: 9, Window: 7 * time.Second, Algorithm: sl},
		{Name: "f7", Namespace: "e", Limit: 9, Window: 7 * time.Second, Algorithm: fx},
		{Name: "s7b", Namespace: "e", Limit: 4, Window: 7 * time.Second, Algorithm: sl},
		{Name: "f59", Namespace: "f", Limit: 30, Window: 59 * time.Second},
		{Name: "s59", Namespace: "g", Limit: 30, Window: 59 * time.Second, Algorithm: sl},
		{Name: "s13", Limit: 200, Window: 13 * time.Second, Algorithm: sl},
	}
	cases := []tc{
		{"odd-2026", time.Date(2026, 12, 6, 9, 59, 0, 0, time.UTC), odd, 3000, 1500, 12, 120},
		{"odd-1970", time.Unix(0, 0).UTC(), odd, 1500, 400, 12, 120},
		{"odd-1970-local", time.Unix(3, 0).In(time.FixedZone("x", -5*3600)), odd, 1500, 400, 12, 120},
		{"odd-2159", time.Date(2159, 12, 31, 23, 58, 0, 0, time.UTC), odd, 1000, 500, 12, 120},
		{"long-runs", time.Date(2026, 12, 6, 9, 59, 0, 0, time.UTC), odd[len(odd)-1:], 2000, 300, 200, 20},
		{"long-runs-mixed", time.Date(2026, 12, 6, 9, 59, 0, 0, time.UTC), odd[5:], 4000, 3000, 150, 25},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bulk, alone := bulkAndAlone(t)
			keys := []string{"a", "b", "c"}
			r := rand.New(rand.NewPCG(3, 5))
			now := c.start
			id := 0
			latest := time.Date(2160, 1, 1, 0, 0, 0, 0, time.UTC)
			clamp := func(x time.Time) time.Time {
				if x.Before(time.Unix(0, 0)) {
					return time.Unix(0, 0).In(x.Location())
				}
				if !x.Before(latest) {
					return latest.Add(-time.Millisecond)
				}
				return x
			}
			var pair []limiter.Policy
			attempt := func() limiter.Attempt {
				id++
				key := keys[r.IntN(len(keys))]
				p := pair[r.IntN(len(pair))]
				a := limiter.Attempt{Now: clamp(now.Add(time.Duration(r.IntN(2*c.jitter+1)-c.jitter) * time.Millisecond)), Route: "GET /x", RequestID: fmt.Sprint(id)}
				a.Charges = []limiter.Charge{{Policy: p, Key: key}}
				if r.IntN(3) == 0 {
					q := pair[r.IntN(len(pair))]
					k2 := keys[r.IntN(len(keys))]
					a.Charges = append(a.Charges, limiter.Charge{Policy: q, Key: k2})
				}
				return a
			}
			for round := range c.rounds {
				now = clamp(now.Add(time.Duration(r.IntN(c.step)) * time.Millisecond))
				if r.IntN(5) == 0 {
					now = clamp(now.Add(-time.Duration(r.IntN(3000)) * time.Millisecond)) // clock back
				}
				pair = []limiter.Policy{c.policies[r.IntN(len(c.policies))], c.policies[r.IntN(len(c.policies))]}
				var as []limiter.Attempt
				for range 1 + r.IntN(c.maxBatch) {
					as = append(as, attempt())
				}
				sameOutcomes(t, round, bulk, alone, as)
			}
			if n := bulk.shards[0].batch.bulked.Load(); n < 150 {
				t.Fatalf("only %d attempts were decided in bulk: the case did not test it", n)
			}
			sameRows(t, bulk, alone)
		})
	}
}
