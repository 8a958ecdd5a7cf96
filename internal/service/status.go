package service

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/ft251/ratelimit/limiter"
)

// status reads the counters of ?key= under every configured policy (or the
// one ?policy= names, whatever routes it guards) without counting
// anything: the first one's at the top level, all of them under "policies"
// when there are several. A sliding policy's count is its weighted count, a
// GCRA policy's the part of its bucket in use; the limit is the key's
// override, if it has one. A store failure is a 503 whatever the fail
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
	req.key = key
	body := pingBody{}
	for i, p := range policies {
		u, err := a.opts.Store.Usage(req.r.Context(), p, key, req.now)
		if err != nil {
			req.err, req.verdict = err, failed
			return storeUnavailable(p.Window)
		}
		if i == 0 {
			body.usageBody = newUsageBody(u)
			req.count = u.Count
		}
		if len(policies) > 1 {
			body.Policies = append(body.Policies, newPolicyBody(u))
		}
	}
	req.verdict = read
	return req.ok(body)
}
