package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// TestPoliciesThatWouldShareCountersAreRefused: two policies with no
// namespace, or the same one, would count in each other's counters (three
// requests under one would use up the other's limit of 3): refused, by
// ValidatePolicies, ValidateRules and a Limiter's first check. So are a
// name used twice, a namespace no key could follow, and more policies than
// a transaction holds.
func TestPoliciesThatWouldShareCountersAreRefused(t *testing.T) {
	a := limiter.Policy{Name: "a", Limit: 3, Window: time.Minute}
	b := limiter.Policy{Name: "b", Limit: 100, Window: time.Minute}
	many := make([]limiter.Policy, limiter.MaxPolicies+1)
	for i := range many {
		many[i] = limiter.Policy{Name: fmt.Sprint("p", i), Limit: 1, Window: time.Second, Namespace: fmt.Sprint("p", i)}
	}
	for name, tc := range map[string]struct {
		policies []limiter.Policy
		want     string
	}{
		"no namespaces":     {[]limiter.Policy{a, b}, `policies "a" and "b" share the namespace ""`},
		"one namespace":     {[]limiter.Policy{withNS(a, "x"), withNS(b, "x")}, `share the namespace "x"`},
		"a name twice":      {[]limiter.Policy{withNS(a, "x"), withNS(a, "y")}, `policy "a" is named twice`},
		"a control char":    {[]limiter.Policy{withNS(a, "x\x1fy")}, `namespace "x\x1fy" is not`},
		"too many policies": {many, "33 policies, more than 32"},
	} {
		err := limiter.ValidatePolicies(tc.policies)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
		rules := make([]limiter.Rule, len(tc.policies))
		for i, p := range tc.policies {
			rules[i] = limiter.Rule{Policy: p}
		}
		if err := limiter.ValidateRules(rules); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s as rules: %v, want an error saying %q", name, err, tc.want)
		}
	}
	if err := limiter.ValidatePolicies([]limiter.Policy{a, withNS(b, "b")}); err != nil {
		t.Errorf("one policy without a namespace beside a namespaced one: %v", err)
	}
	if _, err := (&limiter.Limiter{Policies: []limiter.Policy{withNS(a, "a")}}).Allow(context.Background(), limiter.Request{Key: "k", Cost: 1}); !errors.Is(err, limiter.ErrInvalidPolicies) || !strings.Contains(err.Error(), "no store") {
		t.Errorf("a Limiter without a store: %v, want ErrInvalidPolicies saying so (it used to panic)", err)
	}
	// A nil pointer of a store's type is no store either: its first
	// decision used to panic.
	if _, err := (&limiter.Limiter{Store: (*sqlite.Store)(nil), Policies: []limiter.Policy{withNS(a, "a")}}).Allow(context.Background(), limiter.Request{Key: "k", Cost: 1}); !errors.Is(err, limiter.ErrInvalidPolicies) || !strings.Contains(err.Error(), "no store: a nil *sqlite.Store") {
		t.Errorf("a Limiter with a nil *sqlite.Store: %v, want ErrInvalidPolicies saying so", err)
	}
	// None at all is no configuration: it used to be each check's fault,
	// ErrUnknownPolicy "none applies", a request error.
	if _, err := (&limiter.Limiter{Store: sqlitetest.Open(t, sqlite.Config{})}).Allow(context.Background(), limiter.Request{Key: "k"}); !errors.Is(err, limiter.ErrInvalidPolicies) || !strings.Contains(err.Error(), "no policies") {
		t.Errorf("a Limiter without policies: %v, want ErrInvalidPolicies saying so", err)
	}
	l := &limiter.Limiter{Store: sqlitetest.Open(t, sqlite.Config{}), Policies: []limiter.Policy{a, b}}
	for range 2 {
		if _, err := l.Allow(context.Background(), limiter.Request{Key: "k", Cost: 1}); !errors.Is(err, limiter.ErrInvalidPolicies) {
			t.Fatalf("a Limiter whose policies share counters: %v, want ErrInvalidPolicies", err)
		}
	}
}

func withNS(p limiter.Policy, ns string) limiter.Policy {
	p.Namespace = ns
	return p
}

// TestCostsThatCouldNeverPassAreRefused: a rule's cost above its policy's
// capacity (its limit, or a GCRA policy's burst) is a configuration
// error; a check's cost above an enforced policy's capacity is
// ErrInvalidCost before anything is counted, unless the key's override
// raises it; above a shadow policy's it is the shadow's would-be denial.
func TestCostsThatCouldNeverPassAreRefused(t *testing.T) {
	api := limiter.Policy{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api"}
	daily := limiter.Policy{Name: "daily", Limit: 1000, Window: 24 * time.Hour, Namespace: "daily"}
	tokens := limiter.Policy{Name: "tokens", Limit: 10, Window: time.Minute, Namespace: "tokens", Algorithm: limiter.GCRA, Burst: 3}
	for _, r := range []limiter.Rule{{Policy: api, Cost: 101}, {Policy: tokens, Cost: 4}} {
		if err := limiter.ValidateRules([]limiter.Rule{r}); err == nil || !strings.Contains(err.Error(), "the most one request can pass") {
			t.Errorf("rule %s at cost %d: %v, want refused", r.Policy.Name, r.Cost, err)
		}
	}
	store := sqlitetest.Open(t, sqlite.Config{})
	l := &limiter.Limiter{Store: store, Policies: []limiter.Policy{api, daily, tokens}}
	ctx := context.Background()
	for _, tc := range []struct {
		cost     int64
		policies []string
		want     string
	}{
		{101, []string{"api", "daily"}, `101 is more than policy "api" can ever let through at once, 100`},
		{4, []string{"tokens"}, `4 is more than policy "tokens" can ever let through at once, 3`},
		{1001, []string{"daily"}, `1001 is more than policy "daily"`},
	} {
		if _, err := l.Allow(ctx, limiter.Request{Key: "k", Cost: tc.cost, Policies: tc.policies}); !errors.Is(err, limiter.ErrInvalidCost) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cost %d under %v: %v, want ErrInvalidCost saying %q", tc.cost, tc.policies, err, tc.want)
		}
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, store.Path()), `SELECT count(*) FROM rate_limit_windows`); n != 0 {
		t.Errorf("%d counters written by refused checks", n)
	}
	if o, err := l.Allow(ctx, limiter.Request{Key: "k", Cost: 100, Policies: []string{"api", "daily"}}); err != nil || !o.Allowed {
		t.Errorf("cost 100, api's whole limit: %+v, %v; want allowed", o, err)
	}
	if _, err := store.SetOverride(ctx, api, "big", limiter.Override{Limit: 500}); err != nil {
		t.Fatal(err)
	}
	if o, err := l.Allow(ctx, limiter.Request{Key: "big", Cost: 400, Policies: []string{"api", "daily"}}); err != nil || !o.Allowed {
		t.Errorf("cost 400 for a key whose override gives it 500: %+v, %v; want allowed", o, err)
	}
	shadow := api
	shadow.Shadow = true
	s := &limiter.Limiter{Store: store, Policies: []limiter.Policy{shadow, daily}}
	if o, err := s.Allow(ctx, limiter.Request{Key: "s", Cost: 101}); err != nil || !o.Allowed || o.Decisions[0].Allowed {
		t.Errorf("cost 101 under a shadow of 100 and daily: %+v, %v; want allowed, the shadow would deny", o, err)
	}
	only := &limiter.Limiter{Store: store, Policies: []limiter.Policy{shadow}}
	if _, err := only.Allow(ctx, limiter.Request{Key: "s", Cost: 101}); !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("cost 101 under a shadow of 100 alone: %v, want ErrInvalidCost: more than the largest limit checked", err)
	}
}

// TestLimitsStayInsideTheCounter: a limit, or RATE_LIMIT, beyond
// MaxLimit is refused with the bound in the message; RATE_LIMIT and
// WINDOW_SECONDS are not read when POLICIES is set.
func TestLimitsStayInsideTheCounter(t *testing.T) {
	if err := (limiter.Policy{Name: "a", Limit: limiter.MaxLimit + 1, Window: time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "not from 1 to 999999999999999") {
		t.Errorf("a limit past MaxLimit: %v", err)
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	_, err := envconfig.Read(env("DB_PATH", "/x.db", "RATE_LIMIT", "9223372036854775807"), envconfig.Lambda)
	if err == nil || !strings.Contains(err.Error(), "a whole number from 1 to 999999999999999") {
		t.Errorf("RATE_LIMIT past MaxLimit: %v", err)
	}
	_, err = envconfig.Read(env("DB_PATH", "/x.db", "RATE_LIMIT", "0", "WINDOW_SECONDS", "x", "POLICIES", `[{"name":"a","limit":1,"window":"1s"}]`), envconfig.Lambda)
	if err != nil {
		t.Errorf("RATE_LIMIT=0 beside POLICIES, which replaces it: %v", err)
	}
}

// TestPolicyNamesAreBounded: a policy's name is repeated in every
// response's RateLimit-Policy header, every 429, log line and metric
// dimension: 1 to 64 bytes, as a tier's name and a namespace are. A
// 70,000-byte name used to be taken, and sent as a 70 KB header.
func TestPolicyNamesAreBounded(t *testing.T) {
	p := limiter.Policy{Name: strings.Repeat("a", 64), Limit: 1, Window: time.Second}
	if err := p.Validate(); err != nil {
		t.Errorf("a 64-byte name: %v", err)
	}
	p.Name += "a"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "1 to 64") || strings.Contains(err.Error(), p.Name) {
		t.Errorf("a 65-byte name: %v; want it refused, saying 1 to 64, without repeating it whole", err)
	}
	// Cut short, the name is cut between characters, not inside one.
	if err := (limiter.Policy{Name: "a" + strings.Repeat("é", 40), Limit: 1, Window: time.Second}).Validate(); err == nil || strings.Contains(err.Error(), `\x`) {
		t.Errorf("an 81-byte name of two-byte characters after one of one byte: %v; want it refused, cut on a character", err)
	}
	// POLICIES namespaces a policy by its name: the name is what is too
	// long, said once, not a namespace the variable has no member for.
	_, err := envconfig.Read(func(k string) string {
		return map[string]string{"DB_PATH": "/x.db", "POLICIES": `[{"name":"` + p.Name + `","limit":3,"window":"60s"}]`}[k]
	}, envconfig.Lambda)
	if err == nil || !strings.Contains(err.Error(), "names are 1 to 64") || strings.Contains(err.Error(), "namespace") {
		t.Errorf("POLICIES with a 65-byte name: %v; want the name refused, and no word of a namespace", err)
	}
}

// TestALimitBelowOneIsOneError: a rule whose policy's limit (or a tier's)
// is below 1 is refused for that limit, once: it used to get a second,
// made-up error for its cost ("cost 0 is not from 1 to -5"), though it
// gave none and the default, 1, was not at fault.
func TestALimitBelowOneIsOneError(t *testing.T) {
	for _, p := range []limiter.Policy{
		{Name: "a", Limit: -5, Window: time.Minute},
		{Name: "a", Limit: 0, Window: time.Minute},
		{Name: "a", Limit: 5, Window: time.Minute, Tiers: map[string]limiter.Tier{"free": {Limit: -4}}},
	} {
		err := limiter.Rule{Policy: p, Routes: []string{"/"}, TierHeader: map[bool]string{true: "X-Plan"}[len(p.Tiers) > 0]}.Validate()
		if err == nil || strings.Contains(err.Error(), "cost") || strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("limit %d, tiers %v: %v; want one error, the limit's", p.Limit, p.Tiers, err)
		}
	}
	err := limiter.Rule{Policy: limiter.Policy{Name: "a", Limit: -5, Window: time.Minute}, Routes: []string{"/"}, Cost: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "cost -1 is below 1") || strings.Contains(err.Error(), "to -5") {
		t.Errorf("cost -1 under a limit of -5: %v; want the cost below 1, with no range made of the limit", err)
	}
}
