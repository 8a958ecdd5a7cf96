package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
)

// api is the example: 100 a minute, pro 1000 (burst 200, which
// only GCRA takes, so the window here has none), enterprise 10000.
var api = limiter.Policy{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api",
	Tiers: map[string]limiter.Tier{"pro": {Limit: 1000}, "enterprise": {Limit: 10000}}}

// TestTiersAreValidatedAsThePolicyIs: a tier's name is held to a policy
// name's rules ("default" is taken by the policy's own limit), its limit
// and burst to what the policy could have with them, and a policy holds
// at most 16; every problem is reported at once, each naming its tier.
func TestTiersAreValidatedAsThePolicyIs(t *testing.T) {
	bad := limiter.Policy{Name: "api", Limit: 10, Window: time.Minute, Tiers: map[string]limiter.Tier{
		"Pro":          {Limit: 100},
		"default":      {Limit: 100},
		"zero":         {Limit: 0},
		"burst":        {Limit: 5, Burst: 5},
		"huge":         {Limit: limiter.MaxLimit + 1},
		"":             {Limit: 1},
		"a-b_c.d-9876": {Limit: 20},
	}}
	err := bad.Validate()
	for _, want := range []string{
		`policy "api": tier "Pro": tier names are 1 to 64 lower-case letters`,
		`policy "api": tier "default": the name is reserved for the policy's own limit`,
		`policy "api" tier "zero": limit 0 is not from 1 to 999999999999999`,
		`policy "api" tier "burst": burst applies to the gcra algorithm only`,
		`policy "api" tier "huge": limit 1000000000000000 is not from 1`,
		`policy "api": tier "": tier names are`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "a-b_c.d-9876") {
		t.Errorf("a valid tier is reported: %v", err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 6 {
		t.Errorf("%d problems reported, want 6:\n%v", n, err)
	}

	gcra := limiter.Policy{Name: "tokens", Limit: 10, Window: time.Second, Algorithm: limiter.GCRA, Tiers: map[string]limiter.Tier{
		"pro":   {Limit: 100, Burst: 20},
		"rapid": {Limit: 2_000_000},
		"vast":  {Limit: 1_500_000_000, Burst: 0}, // its burst is its limit, past the bound
	}}
	err = gcra.Validate()
	for _, want := range []string{
		`tier "rapid": a gcra limit of 2000000 per 1s lets a request through more often than every microsecond`,
		`tier "vast": with no burst set, the burst is the limit, 1500000000, more than 1000000000: set a burst`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), `"pro"`) {
		t.Errorf("a valid gcra tier is reported: %v", err)
	}
	gcra = limiter.Policy{Name: "tokens", Limit: 1, Window: 30 * 24 * time.Hour, Algorithm: limiter.GCRA, Tiers: map[string]limiter.Tier{"slow": {Limit: 1, Burst: 1300}}}
	if err := gcra.Validate(); err == nil || !strings.Contains(err.Error(), `tier "slow": a burst of 1300 every 720h0m0s would take more than a century to drain`) {
		t.Errorf("a tier that would take a century to drain: %v", err)
	}

	many := limiter.Policy{Name: "api", Limit: 10, Window: time.Minute, Tiers: map[string]limiter.Tier{}}
	for i := range 17 {
		many.Tiers[fmt.Sprint("t", i)] = limiter.Tier{Limit: 10}
	}
	if err := many.Validate(); err == nil || !strings.Contains(err.Error(), "17 tiers, more than 16") {
		t.Errorf("17 tiers: %v", err)
	}
	delete(many.Tiers, "t0")
	if err := many.Validate(); err != nil {
		t.Errorf("16 tiers: %v", err)
	}
	if err := api.Validate(); err != nil {
		t.Errorf("the issue's example: %v", err)
	}
}

// TestARuleSaysWhereItsTierComesFrom: a claim or a header, not both; a
// claim name as a key source's claim is checked, a header name as HTTP
// has them; a source with no tiers to pick from is a mistake; and a
// constant cost must fit every tier, not only the policy's own limit.
func TestARuleSaysWhereItsTierComesFrom(t *testing.T) {
	small := api
	small.Tiers = map[string]limiter.Tier{"trial": {Limit: 5}, "pro": {Limit: 1000}}
	for _, tc := range []struct {
		rule limiter.Rule
		want string
	}{
		{limiter.Rule{Policy: api, TierClaim: "plan", TierHeader: "X-Plan"}, `a tier comes from a claim ("plan") or a header ("X-Plan"), not both`},
		{limiter.Rule{Policy: api, TierClaim: "a plan"}, `tier claim name "a plan" is not 1 to 128 bytes`},
		{limiter.Rule{Policy: api, TierHeader: "X Plan"}, `tier header "X Plan" is not 1 to 128 letters`},
		{limiter.Rule{Policy: limiter.Policy{Name: "p", Limit: 1, Window: time.Second}, TierClaim: "plan"}, "a tier source, but no tiers to choose from"},
		{limiter.Rule{Policy: small, Cost: 6}, "cost 6 is not from 1 to 5, the most one request can pass (under every tier)"},
	} {
		tc.rule.Routes = []string{"/"}
		if err := tc.rule.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.rule, err, tc.want)
		}
	}
	for _, r := range []limiter.Rule{
		{Policy: api, TierClaim: "custom:plan", Routes: []string{"/"}},
		{Policy: api, TierHeader: "X-Plan", Routes: []string{"/"}},
		{Policy: small, Cost: 5, Routes: []string{"/"}},
	} {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

// TestAnOverrideMustFitEveryTier: an override that sets no burst keeps
// the burst of the key's tier, so it is checked under each tier. A GCRA
// policy of 1 per 30 days with a tier of burst 1300 (100 per 30 days, a
// 390-day bucket): an override of 1 per 30 days leaves the policy's own
// bucket at 1, but the tier's at 1300 emissions of 30 days, more than a
// century; refused, where before tiers it would have passed.
func TestAnOverrideMustFitEveryTier(t *testing.T) {
	p := limiter.Policy{Name: "tokens", Limit: 1, Window: 30 * 24 * time.Hour, Algorithm: limiter.GCRA,
		Tiers: map[string]limiter.Tier{"pro": {Limit: 100, Burst: 1300}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	err := limiter.Override{Limit: 1}.Validate(p)
	if err == nil || !strings.Contains(err.Error(), `policy "tokens" under tier "pro": a burst of 1300 every 720h0m0s would take more than a century`) {
		t.Errorf("override of 1 per 30 days: %v, want refused under tier pro", err)
	}
	if err := (limiter.Override{Limit: 1, Burst: 1}).Validate(p); err != nil {
		t.Errorf("the same with a burst of its own: %v", err)
	}
}

// TestALimiterCheckNamesItsTier: a check naming a tier is judged by the
// tier's limit and capacity (a cost beyond the policy's own, within the
// tier's, passes; beyond the tier's it is refused, counting nothing),
// its decision names the tier, and a tier the policy does not list is
// the policy's own limit, named "".
func TestALimiterCheckNamesItsTier(t *testing.T) {
	store := memory.New()
	defer store.Close()
	l := &limiter.Limiter{Store: store, Policies: []limiter.Policy{api}, Now: func() time.Time { return time.Unix(1767225600, 0) }}
	ctx := context.Background()
	if _, err := l.Allow(ctx, limiter.Request{Key: "k", Cost: 150}); !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("cost 150 under the policy's own 100: %v, want ErrInvalidCost", err)
	}
	if _, err := l.Allow(ctx, limiter.Request{Key: "k", Cost: 1001, Tier: "pro"}); !errors.Is(err, limiter.ErrInvalidCost) || !strings.Contains(err.Error(), "1000") {
		t.Errorf("cost 1001 under pro's 1000: %v, want ErrInvalidCost naming 1000", err)
	}
	o, err := l.Allow(ctx, limiter.Request{Key: "k", Cost: 150, Tier: "pro"})
	if err != nil || !o.Allowed {
		t.Fatalf("cost 150 under pro: %+v, %v; want allowed", o, err)
	}
	if d := o.Decisions[0]; d.Tier != "pro" || d.Policy.Limit != 1000 || d.Count != 150 || d.Remaining != 850 {
		t.Errorf("under pro: tier %q, limit %d, count %d, remaining %d; want pro, 1000, 150, 850", d.Tier, d.Policy.Limit, d.Count, d.Remaining)
	}
	o, err = l.Allow(ctx, limiter.Request{Key: "k", Tier: "platinum"})
	if err != nil {
		t.Fatal(err)
	}
	if d := o.Decisions[0]; o.Allowed || d.Tier != "" || d.Policy.Limit != 100 || d.Count != 151 {
		t.Errorf("a tier not listed: allowed %v, tier %q, limit %d, count %d; want denied under the policy's own 100 at 151, tier \"\"", o.Allowed, d.Tier, d.Policy.Limit, d.Count)
	}
}
