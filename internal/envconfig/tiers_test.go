package envconfig_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/limiter"
)

// TestConfigTiers: the example, with POLICIES' "window", is a
// policy of 100 a minute with a pro tier of 1000 (burst 200, a GCRA
// policy's) and an enterprise tier of 10000, whose requests name their
// plan in the "plan" claim; a header source is read too.
func TestConfigTiers(t *testing.T) {
	c, err := readEnv(env(map[string]string{"DB_PATH": "x", "POLICIES": `[
		{"name": "api", "limit": 100, "window": "60s", "algorithm": "gcra",
		 "tiers": {"pro": {"limit": 1000, "burst": 200}, "enterprise": {"limit": 10000}},
		 "tier": {"source": "claim", "claim": "plan"}},
		{"name": "ping", "limit": 3, "window": "1m", "tiers": {"pro": {"limit": 30}}, "tier": {"source": "header", "header": "X-Plan"}}]`}))
	if err != nil {
		t.Fatal(err)
	}
	api := c.Rules[0]
	want := map[string]limiter.Tier{"pro": {Limit: 1000, Burst: 200}, "enterprise": {Limit: 10000}}
	if !reflect.DeepEqual(api.Policy.Tiers, want) || api.TierClaim != "plan" || api.TierHeader != "" || api.Policy.Limit != 100 {
		t.Errorf("api: tiers %+v, claim %q, header %q", api.Policy.Tiers, api.TierClaim, api.TierHeader)
	}
	if ping := c.Rules[1]; ping.Policy.Tiers["pro"].Limit != 30 || ping.TierHeader != "X-Plan" || ping.TierClaim != "" {
		t.Errorf("ping: %+v", ping)
	}
}

// TestConfigTierProblemsAllAtOnce: every problem of tiers and of where a
// tier comes from is told, each naming its policy and tier, in the JSON's
// terms; members are as strict as a policy's; and the issue's
// "window_seconds" is pointed at "window".
func TestConfigTierProblemsAllAtOnce(t *testing.T) {
	_, err := readEnv(env(map[string]string{"DB_PATH": "x", "POLICIES": `[
		{"name": "a", "limit": 10, "window": "1m", "tiers": {"Pro": {"limit": 5}, "default": {"limit": 5}, "zero": {}, "b": {"limit": 20, "burst": 3}, "neg": {"limit": 2, "burst": -1}}},
		{"name": "c", "limit": 10, "window": "1m", "tiers": {"pro": {"limit": 20, "Limit": 3}}},
		{"name": "d", "limit": 10, "window": "1m", "tiers": {"pro": {"limit": 20}, "pro": {"limit": 30}}},
		{"name": "e", "limit": 10, "window": "1m", "tiers": [{"limit": 20}]},
		{"name": "f", "limit": 10, "window": "1m", "tiers": {}},
		{"name": "g", "limit": 10, "window": "1m", "tiers": {"pro": 20}},
		{"name": "h", "limit": 10, "window": "1m", "tiers": {"pro": {"limit": "20"}}},
		{"name": "i", "limit": 10, "window": "1m", "tiers": {"pro": {"limit": 20}}, "tier": {"source": "cookie"}},
		{"name": "j", "limit": 10, "window": "1m", "tiers": {"pro": {"limit": 20}}, "tier": {"source": "claim"}},
		{"name": "k", "limit": 10, "window": "1m", "tiers": {"pro": {"limit": 20}}, "tier": {"source": "header", "header": "X-Plan", "claim": "plan"}},
		{"name": "l", "limit": 10, "window": "1m", "tiers": {"pro": {"limit": 20}}, "tier": {"source": "header", "header": "X Plan"}},
		{"name": "m", "limit": 10, "window": "1m", "tier": {"source": "claim", "claim": "plan"}},
		{"name": "n", "limit": 10, "window_seconds": 60},
		{"name": "o", "limit": 10, "window": "1m", "tiers": {"pro": {"limit": 20}}, "tier": {"source": "claim", "Claim": "plan"}},
		{"name": "p", "limit": 10, "window": "1m", "cost": 6, "tiers": {"trial": {"limit": 5}}},
		{"name": "q", "limit": 10, "window": "1m", "tiers": {"pro": null}}, null]`}))
	for _, want := range []string{
		`policy "a": tier "Pro": tier names are 1 to 64 lower-case letters`,
		`policy "a": tier "default": the name is reserved`,
		`policy "a" tier "zero": limit is required`,
		`policy "a" tier "b": burst applies to the gcra algorithm only`,
		`policy "a" tier "neg": burst -1 is below 1`,
		`policy "c" tier "pro": unknown member "Limit"; members are limit, burst`,
		`policy "d": tiers: member "pro" is given twice`,
		`policy "e": tiers: found array where an object belongs`,
		`policy "f": tiers is empty`,
		`policy "g" tier "pro": found number where an object belongs`,
		`policy "h" tier "pro": "limit" must be a whole number, not string`,
		`policy "i": tier: source "cookie" is not claim or header`,
		`policy "j": tier: a claim source names its claim`,
		`policy "k": tier: a header source names its header, and no claim`,
		`policy "l": tier header "X Plan" is not`,
		`policy "m": a tier source, but no tiers to choose from`,
		`policy 13: unknown member "window_seconds": POLICIES writes a window as "window"`,
		`policy "o": tier: unknown member "Claim"; members are source, claim, header`,
		`policy "p": cost 6 is not from 1 to 5`,
		`policy "q" tier "pro": found null where an object belongs`,
		`policy 17: found null where a policy object belongs`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("POLICIES error does not say %q", want)
		}
	}
	if t.Failed() {
		t.Logf("the error:\n%v", err)
	}
	if err != nil && strings.Contains(err.Error(), "Go ") {
		t.Errorf("speaks of Go types: %v", err)
	}
	if _, err := readEnv(env(map[string]string{"DB_PATH": "x", "POLICIES": `[{"name":"a","limit":1,"window":"1s","tiers":{"pro":{"limit":2}}}]`})); err != nil {
		t.Errorf("tiers without a source (a check names its tier): %v", err)
	}
}
