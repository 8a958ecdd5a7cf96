package service

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// The rate limit fields read as the draft writes them, one member per
// policy, a name that needs quoting quoted as a Go string (a structured
// field's string), under the names h.Get finds.
func TestRateLimitHeadersText(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ds := []limiter.Decision{
		{Usage: limiter.Usage{Policy: limiter.Policy{Name: "burst", Limit: 5, Window: time.Second}, Remaining: 4, ResetAfter: 900 * time.Millisecond}},
		{Usage: limiter.Usage{Policy: limiter.Policy{Name: `da"ily\`, Limit: 1000, Window: 24 * time.Hour}, Remaining: 0, ResetAfter: 3 * time.Hour}},
		{Usage: limiter.Usage{Policy: limiter.Policy{Name: "shadow", Limit: 1, Window: time.Minute, Shadow: true}, Remaining: -1, ResetAfter: time.Minute}},
	}
	h := http.Header{}
	h.Set("RateLimit", "stale")
	setRateLimitHeaders(h, now, ds)
	var policies, limits []string
	for _, d := range ds {
		policies = append(policies, fmt.Sprintf("%q;q=%d;w=%d", d.Policy.Name, d.Policy.Limit, int64(d.Policy.Window/time.Second)))
		limits = append(limits, fmt.Sprintf("%q;r=%d;t=%d", d.Policy.Name, d.Remaining, int64(d.ResetAfter/time.Second)))
	}
	want := map[string]string{
		"RateLimit-Policy":      strings.Join(policies, ", "),
		"RateLimit":             strings.Join(limits, ", "),
		"X-RateLimit-Limit":     "1000",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     fmt.Sprint(now.Add(3 * time.Hour).Unix()),
	}
	for name, v := range want {
		if got := h.Values(name); len(got) != 1 || got[0] != v {
			t.Errorf("%s: %q, want [%q]", name, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("%d fields, want %d: %v", len(h), len(want), h)
	}
}
