package functions_test

import (
	"bufio"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// TestSeveralPoliciesThroughTheRuntime configures three policies on /ping
// through POLICIES, as the template passes them: the seed's per-key limit,
// a sliding per-source-IP limit, and a strict one rolled out in shadow.
// Windows of 30 days keep the real clock away from their edges.
func TestSeveralPoliciesThroughTheRuntime(t *testing.T) {
	t.Parallel()
	cfg := []string{
		"DB_PATH=" + filepath.Join(t.TempDir(), "ratelimit.db"),
		`POLICIES=[
			{"name": "ping", "limit": 3, "window": "30d"},
			{"name": "per-ip", "limit": 4, "window": "30d", "algorithm": "sliding", "key": "source-ip"},
			{"name": "strict", "limit": 1, "window": "30d", "shadow": true}]`,
		"METRICS_NAMESPACE=RateLimit/e2e",
	}
	ping := startEmulator(t, "ping", cfg...)
	alice, bob := withKey(t, lambdatest.Event(t, "ping.json"), "alice"), withKey(t, lambdatest.Event(t, "ping.json"), "bob")

	for i, want := range []int{200, 200, 200, 429} {
		resp := mustHTTP(t, ping, alice)
		if resp.StatusCode != want {
			t.Fatalf("alice %d: %d %s, want %d (strict is a shadow and rejects no one)", i+1, resp.StatusCode, resp.Body, want)
		}
		if got := lambdatest.Header(resp, "RateLimit-Policy"); got != `"ping";q=3;w=2592000, "per-ip";q=4;w=2592000, "strict";q=1;w=2592000` {
			t.Errorf("alice %d: RateLimit-Policy %q", i+1, got)
		}
	}
	// Alice's 4th was denied by ping alone: per-ip allowed it (4 of 4).
	// Bob is within ping, but shares alice's address, now at 5 of 4.
	resp := mustHTTP(t, ping, bob)
	b := lambdatest.JSONBody(t, resp)
	ps, _ := b["policies"].([]any)
	if resp.StatusCode != 429 || len(ps) != 1 || ps[0].(map[string]any)["name"] != "per-ip" || ps[0].(map[string]any)["algorithm"] != "sliding" {
		t.Errorf("bob: %d %s, want a 429 naming per-ip (sliding) alone", resp.StatusCode, resp.Body)
	}
	if !strings.HasPrefix(lambdatest.Header(resp, "RateLimit"), `"ping";r=2;`) || !strings.Contains(lambdatest.Header(resp, "RateLimit"), `"per-ip";r=0;`) {
		t.Errorf("bob: RateLimit %q, want ping r=2 and per-ip r=0", lambdatest.Header(resp, "RateLimit"))
	}

	// /status sees every policy; ?policy= picks one.
	status := startEmulator(t, "status", cfg...)
	b = lambdatest.JSONBody(t, mustHTTP(t, status, lambdatest.Event(t, "status.json")))
	if ps, _ := b["policies"].([]any); b["count"] != 4.0 || len(ps) != 3 {
		t.Errorf("status: %v, want alice's ping count 4 and three policies", b)
	}

	// The function wrote one valid EMF line per policy and request.
	ping.stop()
	decisions := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(ping.logs.String()))
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"_aws"`) {
			continue
		}
		if err := metrics.Validate([]byte(line)); err != nil {
			t.Fatalf("EMF line invalid: %v\n%s", err, line)
		}
		if !strings.Contains(line, `"Namespace":"RateLimit/e2e"`) {
			t.Errorf("EMF line outside the configured namespace: %s", line)
		}
		for _, d := range []string{"allowed", "rejected", "shadow_rejected"} {
			for _, p := range []string{"ping", "per-ip", "strict"} {
				if strings.Contains(line, `"Decision":"`+d+`"`) && strings.Contains(line, `"Policy":"`+p+`"`) {
					decisions[p+" "+d]++
				}
			}
		}
	}
	want := map[string]int{"ping allowed": 4, "ping rejected": 1, "per-ip allowed": 4, "per-ip rejected": 1, "strict allowed": 2, "strict shadow_rejected": 3}
	for k, n := range want {
		if decisions[k] != n {
			t.Errorf("EMF %s: %d, want %d (all: %v)", k, decisions[k], n, decisions)
		}
	}
}
