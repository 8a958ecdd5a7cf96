package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
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

// uncountedBody is /ping's 200 when only shadow policies apply and none
// could find its key in the request.
type uncountedBody struct {
	Counted bool `json:"counted"`
}

// policyBody is one policy's standing, in the "policies" member of /ping
// and /status when more than one policy applies.
type policyBody struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	Shadow    bool   `json:"shadow,omitempty"`
	usageBody
}

func newPolicyBody(u limiter.Usage) policyBody {
	return policyBody{Name: u.Policy.Name, Algorithm: u.Policy.Algorithm.String(), Shadow: u.Policy.Shadow, usageBody: newUsageBody(u)}
}

// pingBody is /ping's 200: the first policy's standing, and every policy's
// when there are several.
type pingBody struct {
	usageBody
	Policies []policyBody `json:"policies,omitempty"`
}

// ping counts the attempt under every policy that applies and answers 200,
// or 429 if one that is not a shadow rejects it, with the rate limit
// headers of all of them on both.
//
// A shadow policy must not change the answer: one that cannot find its key
// in the request (a claim it lacks, a key that is not valid) is left out of
// this request and named in the log line, where an enforced one would
// answer 400 or 401. If every policy is left out, nothing counts the
// request and nothing limits it: 200 with "counted": false.
func (a *API) ping(req *request) error {
	checks := make([]limiter.Check, 0, len(a.pingRules))
	for _, rule := range a.pingRules {
		key, err := clientKey(req.r, req.caller, rule.KeySource)
		if err != nil && rule.Policy.Shadow {
			req.shadowSkipped = append(req.shadowSkipped, rule.Policy.Name)
			continue
		}
		if err != nil {
			return err
		}
		checks = append(checks, limiter.Check{Policy: rule.Policy, Key: key})
	}
	if len(checks) == 0 {
		req.decision = "uncounted"
		return req.ok(uncountedBody{})
	}
	req.key = checks[0].Key
	route := "GET " + RoutePing
	began := time.Now()
	o, err := a.opts.Store.Allow(req.r.Context(), limiter.Attempt{Checks: checks, Now: req.now, Route: route, RequestID: req.caller.RequestID})
	latency := time.Since(began)
	first := checks[0].Policy
	if err != nil {
		req.err = err
		if a.opts.Metrics != nil {
			a.opts.Metrics.StoreError(req.now, route, limiter.FaultOf(err))
		}
		if a.opts.FailMode == limiter.FailOpen {
			req.decision = "degraded"
			return req.ok(degradedBody{Key: req.key, Limit: first.Limit, Degraded: true})
		}
		req.decision = "error"
		return storeUnavailable(first.Window)
	}
	req.outcome = &o
	req.count, req.fromMemory = o.Decisions[0].Count, o.Decisions[0].FromMemory
	for _, d := range o.Decisions {
		if a.opts.Metrics != nil {
			// A denial from memory took no store time: measuring it
			// would pull the latency figures toward zero.
			took := latency
			if d.FromMemory {
				took = metrics.NoLatency
			}
			a.opts.Metrics.Decision(req.now, d.Policy.Name, route, decisionName(d), took)
		}
	}
	setRateLimitHeaders(req.w.Header(), req.now, o.Decisions)
	if !o.Allowed {
		req.decision = "rejected"
		return rateLimited(o)
	}
	req.decision = "allowed"
	body := pingBody{usageBody: newUsageBody(o.Decisions[0].Usage)}
	if len(o.Decisions) > 1 {
		for _, d := range o.Decisions {
			body.Policies = append(body.Policies, newPolicyBody(d.Usage))
		}
	}
	return req.ok(body)
}

// decisionName is a policy's decision as metrics and logs name it.
func decisionName(d limiter.Decision) string {
	switch {
	case d.Allowed:
		return metrics.Allowed
	case d.Policy.Shadow:
		return metrics.ShadowRejected
	}
	return metrics.Rejected
}

// setRateLimitHeaders writes the draft-ietf-httpapi-ratelimit-headers-11
// fields, one list member per policy, and their widely used X-RateLimit
// predecessors, which hold one policy: the enforced one with the fewest
// requests left (the longest wait among equals).
func setRateLimitHeaders(h http.Header, now time.Time, ds []limiter.Decision) {
	policies, limits := make([]string, len(ds)), make([]string, len(ds))
	var tightest *limiter.Decision
	for i := range ds {
		d := &ds[i]
		policies[i] = fmt.Sprintf("%q;q=%d;w=%d", d.Policy.Name, d.Policy.Limit, d.Policy.WindowSeconds())
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
