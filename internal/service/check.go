package service

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// checkRoute names /check in audit records and metrics.
const checkRoute = http.MethodPost + " " + RouteCheck

// checkRequest is POST /check's body.
type checkRequest struct {
	Key      *string         `json:"key"`
	Cost     json.RawMessage `json:"cost"`
	Policies *[]string       `json:"policies"`
	Tier     *string         `json:"tier"`
}

// checkBody is POST /check's answer, 200 for both outcomes: the limited
// party is the caller's client, so a denial is data, not a 429.
type checkBody struct {
	Allowed    bool              `json:"allowed"`
	Degraded   bool              `json:"degraded,omitempty"`
	Key        string            `json:"key"`
	Cost       int64             `json:"cost"`
	RetryAfter int64             `json:"retry_after"`
	Policies   []checkPolicyBody `json:"policies"`
}

// checkPolicyBody is one checked policy's standing; with the store down
// (FAIL_MODE=open), its counts are null: nothing is known.
type checkPolicyBody struct {
	Name         string `json:"name"`
	Algorithm    string `json:"algorithm"`
	Limit        int64  `json:"limit"`
	Burst        int64  `json:"burst,omitempty"` // GCRA's bucket size
	Remaining    *int64 `json:"remaining"`
	ResetSeconds *int64 `json:"reset_seconds"`
	Denied       bool   `json:"denied"`
	Shadow       bool   `json:"shadow,omitempty"`
	// Tier is the tier in force, for a policy with tiers ("default" for
	// the policy's own limit).
	Tier string `json:"tier,omitempty"`
}

// check decides, for a service in any language, whether its client key
// may proceed at a cost: POST /check {"key", "cost", "policies", "tier"}.
// The key and the tier come from the body alone: the caller is trusted to
// name them (the route is IAM-authorized when deployed); a tier that a
// policy does not list is that policy's own limit. Without "policies", every policy whose
// routes match POST /check applies. The cost is counted under each policy
// in one transaction, denied or not, as /ping counts its 1.
func (a *API) check(req *request) error {
	var in checkRequest
	if err := readJSON(req, &in, badCheck, `{"key": "user-42"}`); err != nil {
		return err
	}
	r, err := a.checkRequest(req, in)
	if err != nil {
		return err
	}
	o, err := a.decide(req, checkRoute, r.Key, func(ctx context.Context) (limiter.Outcome, error) {
		return a.limiter.Allow(ctx, r)
	})
	if err != nil {
		if err := a.undecided(req, err, a.shortestWindow(r.Policies)); err != nil {
			return err
		}
		return req.ok(a.degradedCheck(r))
	}
	setRateLimitHeaders(req.w.Header(), req.now, o.Decisions)
	body := checkBody{Allowed: o.Allowed, Key: req.key, Cost: o.Decisions[0].Cost}
	if !o.Allowed {
		body.RetryAfter = int64(max(o.RetryAfter(), time.Second) / time.Second)
	}
	for _, d := range o.Decisions {
		remaining, reset := d.Remaining, int64(d.ResetAfter.Seconds())
		body.Policies = append(body.Policies, checkPolicyBody{
			Name: d.Policy.Name, Algorithm: d.Policy.Algorithm.String(), Limit: d.Policy.Limit, Burst: burstOf(d.Policy),
			Remaining: &remaining, ResetSeconds: &reset, Denied: !d.Allowed && !d.Policy.Shadow, Shadow: d.Policy.Shadow,
			Tier: tierLabel(d.Usage),
		})
	}
	return req.ok(body)
}

// checkRequest is the check the body asks for, or a 400 problem saying
// what in the body is wrong. What only the limiter can tell (an unknown
// policy, a cost beyond a policy's capacity, a key that is not valid) it
// refuses when asked, counting nothing.
func (a *API) checkRequest(req *request, in checkRequest) (limiter.Request, error) {
	if in.Key == nil {
		return limiter.Request{}, badCheck(`"key" is required`)
	}
	var cost int64 = 1
	if in.Cost != nil {
		var bad string
		if cost, bad = wholeMember("cost", in.Cost, 1); bad != "" {
			return limiter.Request{}, badCheck(bad)
		}
	}
	var names []string
	switch {
	case in.Policies != nil && len(*in.Policies) == 0:
		return limiter.Request{}, badCheck(`"policies" is empty: name at least one, or leave it out`)
	case in.Policies != nil:
		names = *in.Policies
	default:
		rules, _ := a.matching(req.r)
		for _, r := range rules {
			names = append(names, r.Policy.Name)
		}
		if len(names) == 0 {
			return limiter.Request{}, badCheck(`no policy guards POST /check: name "policies"`)
		}
	}
	var tier string
	if in.Tier != nil {
		tier = *in.Tier
	}
	return limiter.Request{Key: strings.Trim(*in.Key, " \t"), Cost: cost, Policies: names, Tier: tier,
		At: req.now, Route: checkRoute, RequestID: req.caller.RequestID}, nil
}

// shortestWindow is the shortest window of the policies named, which the
// limiter found: a 503's Retry-After is capped by it.
func (a *API) shortestWindow(names []string) time.Duration {
	var w time.Duration
	for _, name := range names {
		if p, ok := a.policy(name); ok && (w == 0 || p.Window < w) {
			w = p.Window
		}
	}
	return w
}

// policies are every configured policy, in order.
func (e *engine) policies() []limiter.Policy {
	out := make([]limiter.Policy, len(e.rules))
	for i, r := range e.rules {
		out[i] = r.Policy
	}
	return out
}

// degradedCheck is the answer to r with the store down and
// FAIL_MODE=open: allowed, and nothing known.
func (a *API) degradedCheck(r limiter.Request) checkBody {
	body := checkBody{Allowed: true, Degraded: true, Key: r.Key, Cost: r.Cost}
	for _, name := range r.Policies {
		p, _ := a.policy(name)
		u := limiter.Usage{Policy: decide.Tiered(p, r.Tier), Tier: decide.TierOf(limiter.Charge{Policy: p, Tier: r.Tier})}
		body.Policies = append(body.Policies, checkPolicyBody{Name: p.Name, Algorithm: p.Algorithm.String(), Limit: u.Policy.Limit, Shadow: p.Shadow, Tier: tierLabel(u)})
	}
	return body
}

func badCheck(why string) *Problem {
	return problem(http.StatusBadRequest, TypeInvalidRequest, "The check is not acceptable: "+why+".")
}
