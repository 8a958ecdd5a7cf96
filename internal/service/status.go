package service

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// status reads the counters of ?key= under every configured policy (or the
// one ?policy= names, whatever routes it guards) without counting
// anything: the first one's at the top level, all of them under "policies"
// when there are several. ?tier= reads them under that tier, for each
// policy that lists it (the others, and no ?tier=, under their own
// limits): counts are per key, so only the limit and what is left
// change. A sliding policy's count is its weighted count, a GCRA policy's
// the part of its bucket in use; the limit is the key's override, if it
// has one, else the tier's. A store failure is a 503 whatever the fail
// mode: there is nothing to let through.
func (a *API) status(req *request) error {
	q, err := url.ParseQuery(req.r.URL.RawQuery)
	if err != nil {
		return problem(http.StatusBadRequest, TypeInvalidQuery, "The query string is malformed.")
	}
	keys := q["key"]
	if len(keys) > 1 {
		return problem(http.StatusBadRequest, TypeInvalidQuery, "The query parameter 'key' is given more than once.")
	}
	// Spaces and tabs around a key are not part of it, as for /ping.
	key := ""
	if len(keys) == 1 {
		key = strings.Trim(keys[0], " \t")
	}
	if key == "" {
		return problem(http.StatusBadRequest, TypeInvalidQuery, "The query parameter 'key' is required, e.g. /status?key=alice.")
	}
	if err := limiter.ValidKey(key); err != nil {
		return refusal(err)
	}
	policies := a.limiter.Policies
	if names := q["policy"]; len(names) > 0 {
		p, ok := a.policy(names[0])
		if len(names) > 1 || !ok {
			return problem(http.StatusBadRequest, TypeInvalidQuery, "The query parameter 'policy' names no configured policy, or is given more than once.")
		}
		policies = []limiter.Policy{p}
	}
	tiers := q["tier"]
	if len(tiers) > 1 {
		return problem(http.StatusBadRequest, TypeInvalidQuery, "The query parameter 'tier' is given more than once.")
	}
	tier := ""
	if len(tiers) == 1 {
		tier = tiers[0]
	}
	req.key = key
	body := pingBody{}
	for i, p := range policies {
		// The store applies the key's override on the tier's policy, as it
		// does in a decision (decide.Effective).
		u, err := a.opts.Store.Usage(req.r.Context(), decide.Tiered(p, tier), key, req.now)
		if err != nil {
			req.err, req.verdict = err, failed
			return problemOf(err, p.Window)
		}
		u.Tier = decide.TierOf(limiter.Charge{Policy: p, Tier: tier})
		if i == 0 {
			body.usageBody = newUsageBody(u)
			req.count, req.tier = u.Count, tierLabel(u)
		}
		if len(policies) > 1 {
			body.Policies = append(body.Policies, newPolicyBody(u))
		}
	}
	req.verdict = read
	return req.ok(body)
}
