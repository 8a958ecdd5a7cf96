package service

import (
	"net/http"

	"github.com/ft251/ratelimit/internal/decide"
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
	// Burst is a GCRA policy's bucket size, what remaining counts down
	// from (count + remaining = burst); the windows have none.
	Burst int64 `json:"burst,omitempty"`
	// Tier is the tier in force, for a policy with tiers ("default" for
	// the policy's own limit); the limit and burst are its.
	Tier string `json:"tier,omitempty"`
}

func newUsageBody(u limiter.Usage) usageBody {
	return usageBody{
		Key:          u.Key,
		Count:        u.Count,
		Limit:        u.Policy.Limit,
		Remaining:    u.Remaining,
		WindowStart:  decide.FormatWindow(u.WindowStart),
		ResetSeconds: int64(u.ResetAfter.Seconds()),
		Burst:        burstOf(u.Policy),
		Tier:         tierLabel(u),
	}
}

// burstOf is p's bucket size for GCRA, zero (left out) for the windows.
func burstOf(p limiter.Policy) int64 {
	if p.Algorithm == limiter.GCRA {
		return p.Capacity()
	}
	return 0
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

// uncountedBody is /ping's 200 when no policy counts the request: none
// applies to /ping, or only shadows that could not find their key in it.
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

// pingRoute names /ping in audit records and metrics.
const pingRoute = http.MethodGet + " " + RoutePing

// ping counts the attempt under every policy that guards GET /ping and
// answers 200, or 429 if one that is not a shadow rejects it, with the rate
// limit headers of all of them on both. If nothing counts the request, it
// passes: 200 with "counted": false.
func (a *API) ping(req *request) error {
	rules, _ := a.matching(req.r)
	charges, err := a.chargesOf(req, rules)
	if err != nil {
		return err
	}
	if len(charges) == 0 {
		req.verdict = uncounted
		return req.ok(uncountedBody{})
	}
	o, err := a.allow(req, pingRoute, charges)
	if err != nil {
		if err := a.undecided(req, err, charges[0].Policy.Window); err != nil {
			return err
		}
		return req.ok(degradedBody{Key: req.key, Limit: decide.Tiered(charges[0].Policy, charges[0].Tier).Limit, Degraded: true})
	}
	setRateLimitHeaders(req.w.Header(), req.now, o.Decisions)
	if !o.Allowed {
		return rateLimited(o)
	}
	body := pingBody{usageBody: newUsageBody(o.Decisions[0].Usage)}
	if len(o.Decisions) > 1 {
		for _, d := range o.Decisions {
			body.Policies = append(body.Policies, newPolicyBody(d.Usage))
		}
	}
	return req.ok(body)
}
