package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// weighed is an attempt of cost under p alone.
func weighed(p limiter.Policy, key string, cost int64, now time.Time, rid string) limiter.Attempt {
	return limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: key, Cost: cost}}, Now: now, Route: "POST /check", RequestID: rid}
}

// costs: a cost that exactly fills the limit is allowed, one unit more is
// denied, and denied costs are counted too (every attempt counts, as much
// as it costs); the audit record of an allowed attempt carries its cost.
func costs(t *testing.T, h Harness) {
	in := h.New(t)
	p := limiter.Policy{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api"}
	steps := []struct {
		cost             int64
		allowed          bool
		count, remaining int64
	}{
		{60, true, 60, 40},
		{40, true, 100, 0}, // exactly fills the limit
		{1, false, 101, 0}, // one unit more: denied, and counted
		{5, false, 106, 0},
	}
	for i, st := range steps {
		o := attempt(t, in.Store, weighed(p, "user-42", st.cost, t0.Add(10*time.Second), fmt.Sprint("c", i)))
		d := o.Decisions[0]
		if o.Allowed != st.allowed || d.Count != st.count || d.Remaining != st.remaining || d.Cost != st.cost {
			t.Errorf("cost %d: allowed %v, count %d, remaining %d, cost %d; want %v, %d, %d, %d", st.cost, o.Allowed, d.Count, d.Remaining, d.Cost, st.allowed, st.count, st.remaining, st.cost)
		}
	}
	count, audit := in.Stored(t, p, "user-42", t0)
	if count != 106 || len(audit) != 2 || audit[0].Cost+audit[1].Cost != 100 {
		t.Errorf("stored count %d, audit %+v; want 106 and two records costing 60 and 40", count, audit)
	}
	// A cost beyond the limit could never pass: refused, and not counted.
	if o, err := in.Store.Allow(context.Background(), weighed(p, "big", 101, t0, "big")); !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("cost 101 of a limit of 100: %+v, %v; want ErrInvalidCost", o, err)
	}
	if count, _ := in.Stored(t, p, "big", t0); count != 0 {
		t.Errorf("a refused cost counted %d", count)
	}
	// What holds the next attempt back is its cost: 40 left hold back
	// another 60, until the window ends.
	o := attempt(t, in.Store, weighed(p, "half", 60, t0, "h1"))
	if !o.Allowed || len(o.HoldingBack()) != 1 || o.RetryAfter() != time.Minute {
		t.Errorf("60 of 100: %+v, want allowed, the policy holding another 60 back for the window", o)
	}
	if o := attempt(t, in.Store, weighed(p, "half", 50, t0, "h2")); o.Allowed || o.RetryAfter() != time.Minute {
		t.Errorf("50 more: allowed %v, retry after %v; want denied until the window ends", o.Allowed, o.RetryAfter())
	}
	if u, err := in.Store.Usage(context.Background(), p, "half", t0); err != nil || u.Count != 110 || u.Remaining != 0 {
		t.Errorf("usage = %+v, %v; want count 110 in units, remaining 0", u, err)
	}
}

// slidingCosts: a sliding window weighs costs as it weighs counts.
func slidingCosts(t *testing.T, h Harness) {
	in := h.New(t)
	p := limiter.Policy{Name: "sliding", Limit: 10, Window: time.Minute, Namespace: "sliding", Algorithm: limiter.Sliding}
	attempt(t, in.Store, weighed(p, "k", 8, t0.Add(30*time.Second), "prev")) // 8 units in [0, 60)
	// At 90 s the previous window weighs half: 4; 6 more fit, 7 do not.
	if o := attempt(t, in.Store, weighed(p, "k", 7, t0.Add(90*time.Second), "seven")); o.Allowed {
		t.Errorf("7 units with 4 weighed: %+v, want denied", o.Decisions[0])
	}
	// The denied 7 count: 4 + 7 = 11 now. One unit more is denied too (and
	// counted: 8 this window); the next one fits once 8 * (1 - t/60) + 8 + 1
	// <= 10, at t = 52.5 s: 22.5 s later, told as 23.
	d := attempt(t, in.Store, weighed(p, "k", 1, t0.Add(90*time.Second), "one")).Decisions[0]
	if d.Allowed || d.ResetAfter != 23*time.Second {
		t.Errorf("1 unit at 90 s: allowed %v, retry after %v; want denied, 23s", d.Allowed, d.ResetAfter)
	}
	if d := attempt(t, in.Store, weighed(p, "k", 1, t0.Add(113*time.Second), "later")).Decisions[0]; !d.Allowed {
		t.Errorf("1 unit at 113 s: %+v, want allowed", d)
	}
}
