package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/ft251/ratelimit/limiter"
)

// usageBody is the JSON body of /ping and /status.
type usageBody struct {
	Key          string `json:"key"`
	Count        int64  `json:"count"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	WindowStart  string `json:"window_start"`
	ResetSeconds int64  `json:"reset_seconds"`
}

func newUsageBody(u limiter.Usage) usageBody {
	return usageBody{
		Key:          u.Key,
		Count:        u.Count,
		Limit:        u.Policy.Limit,
		Remaining:    u.Remaining,
		WindowStart:  limiter.FormatWindow(u.WindowStart),
		ResetSeconds: int64(u.ResetAfter.Seconds()),
	}
}

// degradedBody is the /ping body when the store failed and FAIL_MODE=open
// let the request through: the count is unknown, and says so.
type degradedBody struct {
	Key       string `json:"key"`
	Count     *int64 `json:"count"`
	Limit     int64  `json:"limit"`
	Remaining *int64 `json:"remaining"`
	Degraded  bool   `json:"degraded"`
}

// ping counts the attempt and answers 200 or 429, with the rate limit
// headers on both.
func (a *API) ping(req *request) error {
	key, err := clientKey(req.r, req.caller, a.opts.KeySource)
	if err != nil {
		return err
	}
	req.key = key
	d, err := a.opts.Store.Allow(req.r.Context(), limiter.Attempt{
		Policy:    a.opts.Policy,
		Key:       key,
		Now:       req.now,
		Route:     "GET " + RoutePing,
		RequestID: req.caller.RequestID,
	})
	if err != nil {
		req.err = err
		if a.opts.FailMode == limiter.FailOpen {
			req.decision = "degraded"
			return req.ok(degradedBody{Key: key, Limit: a.opts.Policy.Limit, Degraded: true})
		}
		req.decision = "error"
		return storeUnavailable(a.opts.Policy.Window)
	}
	req.count, req.fromMemory = d.Count, d.FromMemory
	setRateLimitHeaders(req.w.Header(), d.Usage)
	if !d.Allowed {
		req.decision = "rejected"
		return rateLimited(d)
	}
	req.decision = "allowed"
	return req.ok(newUsageBody(d.Usage))
}

// setRateLimitHeaders writes the draft-ietf-httpapi-ratelimit-headers-11
// fields and their widely used X-RateLimit predecessors.
func setRateLimitHeaders(h http.Header, u limiter.Usage) {
	reset := int64(u.ResetAfter.Seconds())
	h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", u.Policy.Name, u.Policy.Limit, u.Policy.WindowSeconds()))
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", u.Policy.Name, u.Remaining, reset))
	h.Set("X-RateLimit-Limit", strconv.FormatInt(u.Policy.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(u.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(u.Reset.Unix(), 10))
}
