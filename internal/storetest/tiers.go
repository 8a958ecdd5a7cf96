package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Tiers: usage plans. A charge that names one of its policy's tiers is
// judged by that tier's limit and burst, decided by the store in the
// decision's transaction; a charge that names none, or a tier the policy
// does not list, by the policy's own. Counts are per key, whatever the
// tier.

// tiered is a fixed window of 2 a minute with a pro tier of 4.
var tiered = limiter.Policy{Name: "plans", Limit: 2, Window: time.Minute, Namespace: "plans",
	Tiers: map[string]limiter.Tier{"pro": {Limit: 4}}}

// allowTier is allow, naming tier, at cost.
func allowTier(t *testing.T, s limiter.Store, p limiter.Policy, key, tier string, cost int64, now time.Time, rid string) limiter.Decision {
	t.Helper()
	a := One(p, key, now, "GET /ping", rid)
	a.Charges[0].Tier, a.Charges[0].Cost = tier, cost
	o := attempt(t, s, a)
	if o.Allowed != o.Decisions[0].Allowed {
		t.Fatalf("allow %q: outcome %+v does not match its one decision", key, o)
	}
	return o.Decisions[0]
}

// tiersPickTheLimit: no tier and a tier the policy does not list get the
// policy's 2, and are named ""; pro gets 4, and is named. Usage reads a
// key's standing under the policy decide.Tiered gives: the same count
// under either limit.
func tiersPickTheLimit(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	for _, tc := range []struct {
		key, tier, named string
		limit            int64
	}{
		{"free", "", "", 2},
		{"stranger", "gold", "", 2},
		{"payer", "pro", "pro", 4},
	} {
		for i := range tc.limit + 1 {
			d := allowTier(t, in.Store, tiered, tc.key, tc.tier, 1, t0, fmt.Sprint(tc.key, i))
			want := i < tc.limit
			if d.Allowed != want || d.Tier != tc.named || d.Policy.Limit != tc.limit || d.Count != i+1 || d.Remaining != max(tc.limit-i-1, 0) {
				t.Errorf("%s (tier %q) attempt %d: allowed %v, tier %q, limit %d, count %d, remaining %d; want %v, %q, %d, %d, %d",
					tc.key, tc.tier, i+1, d.Allowed, d.Tier, d.Policy.Limit, d.Count, d.Remaining, want, tc.named, tc.limit, i+1, max(tc.limit-i-1, 0))
			}
		}
		if count, audit := in.Stored(t, tiered, tc.key, t0); count != tc.limit+1 || int64(len(audit)) != tc.limit {
			t.Errorf("%s: stored count %d, %d audit records; want %d and %d", tc.key, count, len(audit), tc.limit+1, tc.limit)
		}
	}
	for _, tc := range []struct {
		tier             string
		limit, remaining int64
	}{{"pro", 4, 0}, {"", 2, 0}} {
		u, err := in.Store.Usage(ctx, decide.Tiered(tiered, tc.tier), "payer", t0)
		if err != nil || u.Count != 5 || u.Policy.Limit != tc.limit || u.Remaining != tc.remaining {
			t.Errorf("usage of payer under tier %q = %+v, %v; want count 5 under the limit %d", tc.tier, u, err, tc.limit)
		}
	}
	if u, err := in.Store.Usage(ctx, decide.Tiered(tiered, "pro"), "free", t0); err != nil || u.Count != 3 || u.Remaining != 1 {
		t.Errorf("usage of free as if pro = %+v, %v; want count 3, 1 left of pro's 4", u, err)
	}
}

// tierChangeMidWindow: a key that used up its free limit and moves to pro
// in the same window keeps its count, judged by pro's limit from its next
// request (through another handle, another process); back on free, it is
// denied by the count pro let it reach. A fixed window of 3 (pro 6); a
// sliding one of 4 (pro 8), half-way through a window whose predecessor
// counted 4; GCRA of 10 per 10 s with bursts of 4 (pro 100, bursts of 20),
// whose bucket is rescaled at each change, as an override's.
func tierChangeMidWindow(t *testing.T, h Harness) {
	in := h.New(t)
	other := in.Another(t)
	run := func(p limiter.Policy, key string, now time.Time, steps []tierStep) {
		t.Helper()
		for i, st := range steps {
			s := in.Store
			if st.tier == "pro" {
				s = other
			}
			d := allowTier(t, s, p, key, st.tier, 1, now, fmt.Sprint(key, i))
			if d.Allowed != st.allowed || p.Algorithm != limiter.GCRA && d.Count != st.count {
				t.Errorf("%s step %d (tier %q): allowed %v, count %d; want %v, %d", p.Name, i+1, st.tier, d.Allowed, d.Count, st.allowed, st.count)
			}
		}
	}
	fixed := limiter.Policy{Name: "fixed", Limit: 3, Window: time.Minute, Namespace: "fixed", Tiers: map[string]limiter.Tier{"pro": {Limit: 6}}}
	run(fixed, "k", t0.Add(10*time.Second), []tierStep{
		{"", true, 1}, {"", true, 2}, {"", true, 3}, {"", false, 4},
		{"pro", true, 5}, {"pro", true, 6}, {"pro", false, 7},
		{"", false, 8},
	})
	if d := allowTier(t, in.Store, fixed, "k", "", 1, t0.Add(time.Minute), "next"); !d.Allowed || d.Count != 1 {
		t.Errorf("fixed, the next window on free: %+v, want allowed at count 1", d)
	}

	sliding := limiter.Policy{Name: "sliding", Limit: 4, Window: time.Minute, Namespace: "sliding", Algorithm: limiter.Sliding,
		Tiers: map[string]limiter.Tier{"pro": {Limit: 8}}}
	for i := range 4 {
		allowTier(t, in.Store, sliding, "k", "", 1, t0.Add(30*time.Second), fmt.Sprint("prev", i))
	}
	// At 90 s the previous window's 4 weigh 2: free lets 2 more through,
	// pro 3 more after free's denied third (2 + 6 = 8), and then none.
	run(sliding, "k", t0.Add(90*time.Second), []tierStep{
		{"", true, 3}, {"", true, 4}, {"", false, 5},
		{"pro", true, 6}, {"pro", true, 7}, {"pro", true, 8}, {"pro", false, 9},
		{"", false, 10},
	})
	gcraTierChange(t, in.Store, other, run)
}

// tierStep is one decision of tierChangeMidWindow: under tier (pro's on
// another handle), allowed or not, and the window's count after it.
type tierStep struct {
	tier    string
	allowed bool
	count   int64 // for the windows
}

// gcraTierChange is tierChangeMidWindow's GCRA part: a bucket rescaled as
// the key moves from free to pro and back.
func gcraTierChange(t *testing.T, s, other limiter.Store, run func(limiter.Policy, string, time.Time, []tierStep)) {
	t.Helper()
	bucket := limiter.Policy{Name: "bucket", Limit: 10, Window: 10 * time.Second, Namespace: "bucket", Algorithm: limiter.GCRA, Burst: 4,
		Tiers: map[string]limiter.Tier{"pro": {Limit: 100, Burst: 20}}}
	// Free's 4 hold back 4 s, 4 of pro's 100 ms emissions once rescaled:
	// 16 of pro's 20 are left.
	steps := []tierStep{{"", true, 0}, {"", true, 0}, {"", true, 0}, {"", true, 0}, {"", false, 0}}
	for range 16 {
		steps = append(steps, tierStep{"pro", true, 0})
	}
	run(bucket, "g", t0, append(steps, tierStep{"pro", false, 0}))
	// Back on free, pro's full bucket (20 emissions of 100 ms) is at most
	// free's full one, not the 20 s its 20 emissions would take at free's
	// rate; one more fits once pro's holds back 3 of its emissions, at
	// 1.7 s: told as 2 s, and denied at 1 s.
	if d := allowTier(t, s, bucket, "g", "", 1, t0, "back"); d.Allowed || d.ResetAfter != 2*time.Second || d.Remaining != 0 {
		t.Errorf("gcra back on free: allowed %v, reset after %v, remaining %d; want denied for 2s", d.Allowed, d.ResetAfter, d.Remaining)
	}
	if d := allowTier(t, other, bucket, "g", "", 1, t0.Add(time.Second), "early"); d.Allowed || d.ResetAfter != time.Second {
		t.Errorf("gcra on free 1 s later: allowed %v, reset after %v; want denied for 1s more", d.Allowed, d.ResetAfter)
	}
	if d := allowTier(t, other, bucket, "g", "", 1, t0.Add(2*time.Second), "after"); !d.Allowed {
		t.Errorf("gcra on free 2 s later: %+v, want allowed, as the wait said", d)
	}
}

// tierBesideOverride: a key's override wins over its tier: pro's 10 is
// the override's 3 for that key, what Usage under the tier reads too;
// once the override is deleted, pro's limit is back. An override that
// sets no burst keeps the burst of the tier.
func tierBesideOverride(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	p := limiter.Policy{Name: "plans", Limit: 2, Window: time.Minute, Namespace: "plans", Tiers: map[string]limiter.Tier{"pro": {Limit: 10}}}
	if _, err := in.Store.SetOverride(ctx, p, "k", limiter.Override{Limit: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		d := allowTier(t, in.Store, p, "k", "pro", 1, t0, fmt.Sprint(i))
		if d.Allowed != (i < 3) || d.Policy.Limit != 3 || d.Tier != "pro" {
			t.Errorf("attempt %d on pro with an override of 3: allowed %v, limit %d, tier %q; want %v, 3, pro", i+1, d.Allowed, d.Policy.Limit, d.Tier, i < 3)
		}
	}
	if u, err := in.Store.Usage(ctx, decide.Tiered(p, "pro"), "k", t0); err != nil || u.Policy.Limit != 3 || u.Count != 4 {
		t.Errorf("usage under pro = %+v, %v; want the override's 3, count 4", u, err)
	}
	if _, err := in.Store.DeleteOverride(ctx, p, "k"); err != nil {
		t.Fatal(err)
	}
	if d := allowTier(t, in.Store, p, "k", "pro", 1, t0, "deleted"); !d.Allowed || d.Policy.Limit != 10 || d.Count != 5 {
		t.Errorf("after the delete: %+v, want allowed under pro's 10 at count 5", d)
	}

	g := limiter.Policy{Name: "tokens", Limit: 10, Window: 10 * time.Second, Namespace: "tokens", Algorithm: limiter.GCRA, Burst: 4,
		Tiers: map[string]limiter.Tier{"pro": {Limit: 100, Burst: 20}}}
	if _, err := in.Store.SetOverride(ctx, g, "v", limiter.Override{Limit: 50}); err != nil {
		t.Fatal(err)
	}
	if d := allowTier(t, in.Store, g, "v", "pro", 1, t0, "g"); !d.Allowed || d.Policy.Limit != 50 || d.Policy.Capacity() != 20 || d.Remaining != 19 {
		t.Errorf("gcra on pro with an override of 50: limit %d, burst %d, remaining %d; want 50, pro's 20, 19", d.Policy.Limit, d.Policy.Capacity(), d.Remaining)
	}
	if d := allowTier(t, in.Store, g, "v", "", 1, t0, "g2"); !d.Allowed || d.Policy.Limit != 50 || d.Policy.Capacity() != 4 {
		t.Errorf("gcra on the default tier with an override of 50: limit %d, burst %d; want 50 and the policy's 4", d.Policy.Limit, d.Policy.Capacity())
	}
}

// tierCosts: a tier's capacity bounds a cost as the policy's does. A
// cost of 150 could never pass the policy's own 100, and is refused,
// counting nothing; under pro's 1000 it counts 150, and its audit record
// says so. Under GCRA, pro's burst of 20 takes a cost of 12 at once
// where the policy's 4 could not, and then 8 are left.
func tierCosts(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	p := limiter.Policy{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api", Tiers: map[string]limiter.Tier{"pro": {Limit: 1000}}}
	if o, err := in.Store.Allow(ctx, weighed(p, "k", 150, t0, "default")); !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("cost 150 under the default tier's 100: %+v, %v; want ErrInvalidCost", o, err)
	}
	if count, _ := in.Stored(t, p, "k", t0); count != 0 {
		t.Errorf("the refused cost counted %d", count)
	}
	d := allowTier(t, in.Store, p, "k", "pro", 150, t0, "pro")
	if !d.Allowed || d.Count != 150 || d.Remaining != 850 || d.Cost != 150 {
		t.Errorf("cost 150 under pro: %+v, want allowed, 150 counted, 850 left", d)
	}
	// Back on the default tier, 150 counted leave the key nothing of 100.
	if d := allowTier(t, in.Store, p, "k", "", 1, t0, "after"); d.Allowed || d.Count != 151 {
		t.Errorf("one more on the default tier: %+v, want denied at 151", d)
	}
	if count, audit := in.Stored(t, p, "k", t0); count != 151 || len(audit) != 1 || audit[0].Cost != 150 {
		t.Errorf("stored %d, audit %+v; want 151 and one record of cost 150", count, audit)
	}

	g := limiter.Policy{Name: "tokens", Limit: 10, Window: 10 * time.Second, Namespace: "tokens", Algorithm: limiter.GCRA, Burst: 4,
		Tiers: map[string]limiter.Tier{"pro": {Limit: 100, Burst: 20}}}
	if _, err := in.Store.Allow(ctx, weighed(g, "g", 12, t0, "g")); !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("gcra cost 12 under a burst of 4: %v, want ErrInvalidCost", err)
	}
	if d := allowTier(t, in.Store, g, "g", "pro", 12, t0, "g-pro"); !d.Allowed || d.Remaining != 8 {
		t.Errorf("gcra cost 12 under pro: %+v, want allowed with 8 left", d)
	}
	if d := allowTier(t, in.Store, g, "g", "pro", 9, t0, "g-pro-2"); d.Allowed || d.Remaining != 8 {
		t.Errorf("gcra cost 9 with 8 left: %+v, want denied, the bucket as it was", d)
	}
}
