package functions_test

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// TestPlansThroughTheRuntime: docs/plans.md's deployment, run under the
// emulator. /ping is limited per JWT subject, 2 in 30 days on the default
// tier and 5 on pro, the plan named by the authorizer's "plan" claim, as
// POLICIES has it in the template. The fixtures of two callers, one on
// free (which the policy does not list: the default tier) and one on pro,
// each get their plan's limit, in X-RateLimit-Limit and in the 429, and
// /status?tier= reads the pro caller's standing under pro; the metrics
// carry each plan's tier.
func TestPlansThroughTheRuntime(t *testing.T) {
	t.Parallel()
	cfg := []string{
		"DB_PATH=" + filepath.Join(t.TempDir(), "ratelimit.db"),
		`POLICIES=[{"name": "ping", "limit": 2, "window": "30d", "key": "claim:sub",
			"tiers": {"pro": {"limit": 5}}, "tier": {"source": "claim", "claim": "plan"}}]`,
		"METRICS_NAMESPACE=RateLimit/e2e",
	}
	for name, plan := range map[string]string{"ping-jwt-free.json": "free", "ping-jwt-pro.json": "pro"} {
		e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, name)
		if got := e.RequestContext.Authorizer.JWT.Claims["plan"]; got != plan {
			t.Fatalf("%s: plan claim %q, want %q", name, got, plan)
		}
	}
	ping := startEmulator(t, "ping", cfg...)
	for _, tc := range []struct {
		fixture, sub, tier string
		limit              int
	}{
		{"ping-jwt-free.json", "user-7", "default", 2},
		{"ping-jwt-pro.json", "user-9", "pro", 5},
	} {
		event := lambdatest.Event(t, tc.fixture)
		for i := range tc.limit {
			resp := mustHTTP(t, ping, event)
			b := lambdatest.JSONBody(t, resp)
			if resp.StatusCode != 200 || b["key"] != tc.sub || b["tier"] != tc.tier || b["count"] != float64(i+1) {
				t.Fatalf("%s request %d: %d %s, want 200 for %s on %s at count %d", tc.fixture, i+1, resp.StatusCode, resp.Body, tc.sub, tc.tier, i+1)
			}
			if got := lambdatest.Header(resp, "X-RateLimit-Limit"); got != strconv.Itoa(tc.limit) {
				t.Errorf("%s request %d: X-RateLimit-Limit %s, want %d", tc.fixture, i+1, got, tc.limit)
			}
		}
		resp := mustHTTP(t, ping, event)
		b := lambdatest.JSONBody(t, resp)
		ps, _ := b["policies"].([]any)
		if resp.StatusCode != 429 || len(ps) != 1 || ps[0].(map[string]any)["tier"] != tc.tier || ps[0].(map[string]any)["limit"] != float64(tc.limit) {
			t.Errorf("%s past its plan: %d %s, want a 429 naming tier %s, limit %d", tc.fixture, resp.StatusCode, resp.Body, tc.tier, tc.limit)
		}
		if got := lambdatest.Header(resp, "RateLimit-Policy"); got != `"ping";q=`+strconv.Itoa(tc.limit)+`;w=2592000` {
			t.Errorf("%s: RateLimit-Policy %q", tc.fixture, got)
		}
	}

	status := startEmulator(t, "status", cfg...)
	for query, want := range map[string]float64{"key=user-9&tier=pro": 5, "key=user-9": 2} {
		event := edit(t, lambdatest.Event(t, "status.json"), func(e map[string]any) { e["rawQueryString"] = query })
		b := lambdatest.JSONBody(t, mustHTTP(t, status, event))
		if b["count"] != 6.0 || b["limit"] != want {
			t.Errorf("status?%s: %v, want count 6 under the limit %v", query, b, want)
		}
	}

	ping.stop()
	tiers := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(ping.logs.String()))
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"_aws"`) {
			continue
		}
		if err := metrics.Validate(sc.Bytes()); err != nil {
			t.Fatalf("EMF line invalid: %v\n%s", err, sc.Text())
		}
		var m map[string]any
		json.Unmarshal(sc.Bytes(), &m)
		tiers[m["Tier"].(string)+" "+m["Decision"].(string)]++
	}
	want := map[string]int{"default allowed": 2, "default rejected": 1, "pro allowed": 5, "pro rejected": 1}
	for k, n := range want {
		if tiers[k] != n {
			t.Errorf("EMF %s: %d, want %d (all: %v)", k, tiers[k], n, tiers)
		}
	}
}
