package service

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// setRateLimitHeaders writes the draft-ietf-httpapi-ratelimit-headers-11
// fields, one list member per policy, and their widely used X-RateLimit
// predecessors, which hold one policy: the enforced one with the fewest
// requests left (the longest wait among equals). For each policy, q is its
// limit (the tier's in force, or an override's, if the key has one) and w
// its window, r what is
// left of it and t when it is whole again: a fixed or sliding window's end,
// or for GCRA, when the bucket has drained; with too little left for
// another request of the same cost, t is when one fits.
func setRateLimitHeaders(h http.Header, now time.Time, ds []limiter.Decision) {
	policies, limits := make([]string, len(ds)), make([]string, len(ds))
	var tightest *limiter.Decision
	for i := range ds {
		d := &ds[i]
		policies[i] = fmt.Sprintf("%q;q=%d;w=%d", d.Policy.Name, d.Policy.Limit, decide.WindowSeconds(d.Policy))
		limits[i] = fmt.Sprintf("%q;r=%d;t=%d", d.Policy.Name, d.Remaining, int64(d.ResetAfter/time.Second))
		if tightest == nil || tightest.Policy.Shadow && !d.Policy.Shadow ||
			tightest.Policy.Shadow == d.Policy.Shadow && (d.Remaining < tightest.Remaining ||
				d.Remaining == tightest.Remaining && d.ResetAfter > tightest.ResetAfter) {
			tightest = d
		}
	}
	h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	h.Set("RateLimit", strings.Join(limits, ", "))
	h.Set("X-RateLimit-Limit", strconv.FormatInt(tightest.Policy.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(tightest.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(tightest.ResetAfter).Unix(), 10))
}
