package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
)

// planStep is one request of docs/plans.md's worked example: at seconds
// past the minute, on a plan, at a cost, and what it gets.
type planStep struct {
	at         time.Duration
	tier       string
	cost       int64
	allowed    bool
	limit      int64
	remaining  int64
	retryAfter time.Duration // of a denial only
}

// runPlan sends steps for one key through a Limiter over p, checking each.
func runPlan(t *testing.T, p limiter.Policy, key string, steps []planStep) {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := &limiter.Limiter{Store: memory.New(), Policies: []limiter.Policy{p}}
	for i, st := range steps {
		o, err := lim.Allow(context.Background(), limiter.Request{Key: key, Tier: st.tier, Cost: st.cost, At: t0.Add(st.at)})
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		d := o.Decisions[0]
		if o.Allowed != st.allowed || d.Policy.Limit != st.limit || d.Remaining != st.remaining || !st.allowed && o.RetryAfter() != st.retryAfter {
			t.Errorf("step %d (%v, tier %q, cost %d): allowed %v, limit %d, remaining %d, retry after %v; docs/plans.md says %v, %d, %d, %v",
				i+1, st.at, st.tier, st.cost, o.Allowed, d.Policy.Limit, d.Remaining, o.RetryAfter(), st.allowed, st.limit, st.remaining, st.retryAfter)
		}
	}
}

// TestPlansWorkedExample: docs/plans.md's worked example, as its table
// and paragraphs tell it. A fixed window of 100 a minute, pro 1000: the
// upgrade keeps the count and leaves 898; an old token's free request is
// over free's 100; the next window starts at 1. GCRA, free 100 a minute
// (burst 100) and pro 1000 with a burst of 200: free's whole burst is 100
// of pro's emissions, half pro's bucket; pro's whole bucket back on free
// is told Retry-After 7, and one more free request fits 6.06 s later.
func TestPlansWorkedExample(t *testing.T) {
	fixed := limiter.Policy{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api", Tiers: map[string]limiter.Tier{"pro": {Limit: 1000}}}
	steps := []planStep{{at: 0, tier: "free", cost: 99, allowed: true, limit: 100, remaining: 1},
		{at: 20 * time.Second, tier: "free", allowed: true, limit: 100, remaining: 0},
		{at: 20 * time.Second, tier: "free", allowed: false, limit: 100, remaining: 0, retryAfter: 40 * time.Second},
		{at: 30 * time.Second, tier: "pro", allowed: true, limit: 1000, remaining: 898},
		{at: 45 * time.Second, tier: "free", allowed: false, limit: 100, remaining: 0, retryAfter: 15 * time.Second},
		{at: time.Minute, tier: "pro", allowed: true, limit: 1000, remaining: 999},
	}
	runPlan(t, fixed, "user-9", steps)

	gcra := limiter.Policy{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api", Algorithm: limiter.GCRA,
		Tiers: map[string]limiter.Tier{"pro": {Limit: 1000, Burst: 200}}}
	runPlan(t, gcra, "spent-free", []planStep{
		{at: 0, tier: "free", cost: 100, allowed: true, limit: 100, remaining: 0},
		{at: 0, tier: "pro", allowed: true, limit: 1000, remaining: 99},
	})
	runPlan(t, gcra, "spent-pro", []planStep{
		{at: 0, tier: "pro", cost: 200, allowed: true, limit: 1000, remaining: 0},
		{at: 0, tier: "free", allowed: false, limit: 100, remaining: 0, retryAfter: 7 * time.Second},
		{at: 6 * time.Second, tier: "free", allowed: false, limit: 100, remaining: 0, retryAfter: time.Second},
		{at: 6060 * time.Millisecond, tier: "free", allowed: true, limit: 100, remaining: 0},
	})
}
