package decide_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// tokens is a GCRA policy of 60 a minute (burst 10) with a pro tier of
// 600 a minute (burst 100) and a lite one of 120 a minute and no burst
// of its own.
var tokens = limiter.Policy{Name: "tokens", Limit: 60, Burst: 10, Window: time.Minute, Algorithm: limiter.GCRA, Namespace: "tokens",
	Tiers: map[string]limiter.Tier{"pro": {Limit: 600, Burst: 100}, "lite": {Limit: 120}}}

// TestTheEffectivePolicyIsTheTierThenTheOverride: a listed tier sets the
// limit and burst (a tier without a burst has its limit's, not the
// policy's); a tier not listed, or none, is the policy's own; a key's
// override wins over the tier, keeping the tier's burst when it sets
// none; the Tiers stay, for responses to name.
func TestTheEffectivePolicyIsTheTierThenTheOverride(t *testing.T) {
	for _, tc := range []struct {
		name          string
		tier          string
		o             *limiter.Override
		limit, burst  int64
		tierInForce   string
		capacityAfter int64
	}{
		{"no tier", "", nil, 60, 10, "", 10},
		{"a listed tier", "pro", nil, 600, 100, "pro", 100},
		{"a tier without a burst", "lite", nil, 120, 0, "lite", 120},
		{"a tier not listed", "gold", nil, 60, 10, "", 10},
		{"an override beside a tier", "pro", &limiter.Override{Limit: 5}, 5, 100, "pro", 100},
		{"an override with a burst", "pro", &limiter.Override{Limit: 5, Burst: 2}, 5, 2, "pro", 2},
		{"an override and no tier", "", &limiter.Override{Limit: 5}, 5, 10, "", 10},
	} {
		c := limiter.Charge{Policy: tokens, Key: "k", Tier: tc.tier}
		p := decide.Effective(c, tc.o)
		if p.Limit != tc.limit || p.Burst != tc.burst || p.Capacity() != tc.capacityAfter || len(p.Tiers) != 2 {
			t.Errorf("%s: limit %d burst %d capacity %d tiers %d; want %d, %d, %d, 2", tc.name, p.Limit, p.Burst, p.Capacity(), len(p.Tiers), tc.limit, tc.burst, tc.capacityAfter)
		}
		if got := decide.TierOf(c); got != tc.tierInForce {
			t.Errorf("%s: TierOf %q, want %q", tc.name, got, tc.tierInForce)
		}
	}
	if p := decide.Tiered(tokens, "pro"); p.Limit != 600 || p.Burst != 100 {
		t.Errorf("Tiered pro: %d/%d", p.Limit, p.Burst)
	}
	if p := decide.Tiered(tokens, "nope"); p.Limit != 60 || p.Burst != 10 {
		t.Errorf("Tiered of a tier not listed: %d/%d, want the policy's", p.Limit, p.Burst)
	}
}

// TestADecisionNamesItsTier: Decide names the tier each charge is judged
// under, also when a denied attempt leaves its GCRA bucket where it was
// (settle recomputes the standing, and must not lose the name); a tier
// the policy does not list is "".
func TestADecisionNamesItsTier(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	window := limiter.Policy{Name: "ping", Limit: 1, Window: time.Minute, Tiers: map[string]limiter.Tier{"pro": {Limit: 2}}}
	c := []limiter.Charge{{Policy: window, Key: "k", Tier: "pro"}, {Policy: tokens, Key: "k", Tier: "pro"}}
	c[0].Policy, c[1].Policy = decide.Effective(c[0], nil), decide.Effective(c[1], nil)
	a := limiter.Attempt{Charges: c, Now: now}
	o := decide.Decide(a, []decide.State{{Cur: 3}, {}}) // the window denies; the bucket had room
	if o.Allowed || o.Decisions[0].Tier != "pro" || o.Decisions[1].Tier != "pro" || o.Decisions[1].Moved {
		t.Errorf("denied by the window: allowed %v, tiers %q %q, bucket moved %v; want denied, pro and pro, unmoved",
			o.Allowed, o.Decisions[0].Tier, o.Decisions[1].Tier, o.Decisions[1].Moved)
	}
	o = decide.Decide(a, []decide.State{{Cur: 1}, {}})
	if !o.Allowed || o.Decisions[0].Tier != "pro" || o.Decisions[1].Tier != "pro" {
		t.Errorf("allowed: %v, tiers %q %q, want allowed under pro", o.Allowed, o.Decisions[0].Tier, o.Decisions[1].Tier)
	}
	c[0].Tier = "gold"
	if d := decide.Decide(limiter.Attempt{Charges: c[:1], Now: now}, []decide.State{{Cur: 1}}).Decisions[0]; d.Tier != "" {
		t.Errorf("a tier not listed: %q, want \"\"", d.Tier)
	}
}

// TestATierChangeRescalesTheBucket: a key that spent its whole free
// bucket (10 at 60 a minute: T = 1 s, the TAT 10 s ahead) and moves to
// pro (T = 100 ms, burst 100) holds back 10 of pro's emissions: 90 left,
// where the TAT read at pro's rate would leave none. Back on free with
// pro's bucket full (100 emissions of 100 ms, 10 s), free's bucket is at
// most full, and the key waits until pro's holds back no more than 9 of
// its emissions: 9.1 s, told as 10 s.
func TestATierChangeRescalesTheBucket(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	free := decide.Effective(limiter.Charge{Policy: tokens}, nil)
	pro := decide.Effective(limiter.Charge{Policy: tokens, Tier: "pro"}, nil)
	spent := decide.State{TAT: now.Add(10 * time.Second), Emission: decide.Emission(free)}
	d := decide.Decide(limiter.Attempt{Charges: []limiter.Charge{{Policy: pro, Key: "k", Tier: "pro"}}, Now: now}, []decide.State{spent}).Decisions[0]
	if !d.Allowed || d.Remaining != 89 || d.Tier != "pro" {
		t.Errorf("moved to pro: allowed %v, remaining %d, tier %q; want allowed with 89 left", d.Allowed, d.Remaining, d.Tier)
	}
	full := decide.State{TAT: now.Add(10 * time.Second), Emission: decide.Emission(pro)} // 100 of pro's
	d = decide.Decide(limiter.Attempt{Charges: []limiter.Charge{{Policy: free, Key: "k"}}, Now: now}, []decide.State{full}).Decisions[0]
	if d.Allowed || d.ResetAfter != 10*time.Second {
		t.Errorf("back on free: allowed %v, reset after %v; want denied for 10s", d.Allowed, d.ResetAfter)
	}
	free1 := []limiter.Charge{{Policy: free, Key: "k"}}
	if d := decide.Decide(limiter.Attempt{Charges: free1, Now: now.Add(9 * time.Second)}, []decide.State{full}).Decisions[0]; d.Allowed || d.ResetAfter != time.Second {
		t.Errorf("back on free, 9 s later: allowed %v, reset after %v; want denied for 1s more", d.Allowed, d.ResetAfter)
	}
	if d := decide.Decide(limiter.Attempt{Charges: free1, Now: now.Add(9100 * time.Millisecond)}, []decide.State{full}).Decisions[0]; !d.Allowed {
		t.Errorf("back on free, 9.1 s later: %+v, want allowed", d)
	}
}

// TestValidateRefusesWhatNoStoreCanDecide: no charges, an invalid policy
// (a tier's included), a cost out of range.
func TestValidateRefusesWhatNoStoreCanDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	badTier := tokens
	badTier.Tiers = map[string]limiter.Tier{"pro": {Limit: 0}}
	for name, a := range map[string]limiter.Attempt{
		"no charges":   {Now: now},
		"a bad tier":   {Charges: []limiter.Charge{{Policy: badTier, Key: "k"}}, Now: now},
		"a cost below": {Charges: []limiter.Charge{{Policy: tokens, Key: "k", Cost: -1}}, Now: now},
	} {
		if decide.Validate(a) == nil {
			t.Errorf("%s: valid", name)
		}
	}
	err := decide.Validate(limiter.Attempt{Charges: []limiter.Charge{{Policy: tokens, Key: "k", Cost: limiter.MaxLimit + 1}}, Now: now})
	if !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("a cost past MaxLimit: %v, want ErrInvalidCost", err)
	}
	if err := decide.Validate(limiter.Attempt{Charges: []limiter.Charge{{Policy: tokens, Key: "k", Tier: "anything at all"}}, Now: now}); err != nil {
		t.Errorf("a tier not listed is the default, not an error: %v", err)
	}
}
