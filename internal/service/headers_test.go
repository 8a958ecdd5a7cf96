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

// TestXRateLimitResetIsNeverEarly: X-RateLimit-Reset is when the wait
// ends, in whole seconds rounded up, so that a client that comes back then
// is let through. It used to be the instant truncated: 0.6 s into a second,
// a wait of 1 s (from 0.4 s, rounded up) ended at the second's start +1,
// 0.6 s early, and a GCRA or sliding client back then was denied.
func TestXRateLimitResetIsNeverEarly(t *testing.T) {
	now := time.Unix(1_800_000_000, 600_000_000)
	for _, after := range []time.Duration{time.Second, 3 * time.Second} {
		h := http.Header{}
		setRateLimitHeaders(h, now, []limiter.Decision{{Usage: limiter.Usage{Policy: limiter.Policy{Name: "g", Limit: 2, Window: 2 * time.Second, Algorithm: limiter.GCRA}, ResetAfter: after}}})
		want := now.Add(after).Truncate(time.Second).Add(time.Second).Unix()
		if got := h.Get("X-RateLimit-Reset"); got != fmt.Sprint(want) {
			t.Errorf("a wait of %v at %v: X-RateLimit-Reset %s, want %d, when the wait has ended", after, now, got, want)
		}
	}
	// A sliding window's wait that is its end (requests left) is that end
	// exactly, not a second after it (rounded twice).
	h := http.Header{}
	end := time.Unix(1_800_000_060, 0)
	setRateLimitHeaders(h, time.Unix(1_800_000_010, 300_000_000), []limiter.Decision{{Usage: limiter.Usage{Policy: limiter.Policy{Name: "s", Limit: 5, Window: time.Minute, Algorithm: limiter.Sliding}, Remaining: 3, Reset: end, ResetAfter: 50 * time.Second}, Allowed: true, Cost: 1}})
	if got := h.Get("X-RateLimit-Reset"); got != fmt.Sprint(end.Unix()) {
		t.Errorf("a sliding window's end: X-RateLimit-Reset %s, want %d", got, end.Unix())
	}
	// A fixed window ends on a whole second: its end exactly.
	h = http.Header{}
	setRateLimitHeaders(h, now, []limiter.Decision{{Usage: limiter.Usage{Policy: limiter.Policy{Name: "f", Limit: 2, Window: time.Minute}, ResetAfter: 60 * time.Second}}})
	if got := h.Get("X-RateLimit-Reset"); got != fmt.Sprint(end.Unix()) {
		t.Errorf("a fixed window: X-RateLimit-Reset %s, want its end, %d", got, end.Unix())
	}
}

// TestXRateLimitNamesThePolicyWithFewestRequestsLeft, at the request's
// cost: a policy of 10 that a request costs 4 of, with 2 left, has no
// request left, as a policy of 1 with none; the longer wait of the two is
// the one to tell. It used to be picked by units left, the policy of 1,
// and X-RateLimit-Reset sent the client back 54 s before Retry-After.
func TestXRateLimitNamesThePolicyWithFewestRequestsLeft(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	setRateLimitHeaders(h, now, []limiter.Decision{
		{Usage: limiter.Usage{Policy: limiter.Policy{Name: "a", Limit: 10, Window: time.Minute}, Remaining: 2, ResetAfter: 55 * time.Second}, Allowed: false, Cost: 4},
		{Usage: limiter.Usage{Policy: limiter.Policy{Name: "b", Limit: 1, Window: 2 * time.Second}, Remaining: 0, ResetAfter: time.Second}, Allowed: false, Cost: 1},
	})
	if h.Get("X-RateLimit-Limit") != "10" || h.Get("X-RateLimit-Reset") != fmt.Sprint(now.Add(55*time.Second).Unix()) {
		t.Errorf("X-RateLimit-Limit %s, Reset %s; want policy a's 10 and its end in 55 s", h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Reset"))
	}
}

// TestXRateLimitResetTiesGoToTheLaterEnd: a fixed window and a GCRA
// bucket, neither with a request left, whose waits (4.1 s and 4.6 s) both
// round up to 5 s: the
// fixed window ends at N+10 exactly, the bucket at N+10.5, so the header
// says N+11. The tie used to go to the policy listed first, the fixed
// window, and a client back at N+10 was denied by the bucket (a tester's
// finding: about 1 in 1,000 random pairs of policies).
func TestXRateLimitResetTiesGoToTheLaterEnd(t *testing.T) {
	n := time.Unix(1_800_000_000, 0)
	now := n.Add(5900 * time.Millisecond)
	h := http.Header{}
	setRateLimitHeaders(h, now, []limiter.Decision{
		{Usage: limiter.Usage{Policy: limiter.Policy{Name: "fixed", Limit: 1, Window: 10 * time.Second}, Remaining: 0, ResetAfter: 5 * time.Second}, Cost: 1},
		{Usage: limiter.Usage{Policy: limiter.Policy{Name: "gcra", Limit: 1, Window: 10 * time.Second, Algorithm: limiter.GCRA}, Remaining: 0, ResetAfter: 5 * time.Second}, Cost: 1},
	})
	if got, want := h.Get("X-RateLimit-Reset"), fmt.Sprint(n.Unix()+11); got != want {
		t.Errorf("X-RateLimit-Reset %s, want %s (N+11): the bucket lets a request through at N+10.5", got, want)
	}
}
