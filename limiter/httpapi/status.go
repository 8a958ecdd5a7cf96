package httpapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/ft251/ratelimit/limiter"
)

// status reads the counters of ?key= under every policy of /ping (or the
// one ?policy= names) without counting anything: the first one's at the top
// level, all of them under "policies" when there are several. A sliding
// policy's count is its weighted count. A store failure is a 503 whatever
// the fail mode: there is nothing to let through.
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
		return invalidKey(err)
	}
	rules := a.pingRules
	if names := q["policy"]; len(names) > 0 {
		rules = nil
		for _, r := range a.pingRules {
			if len(names) == 1 && r.Policy.Name == names[0] {
				rules = []limiter.Rule{r}
			}
		}
		if rules == nil {
			return problem(http.StatusBadRequest, TypeInvalidQuery, "The query parameter 'policy' names no policy of /ping, or is given more than once.")
		}
	}
	req.key = key
	body := pingBody{}
	for i, rule := range rules {
		u, err := a.opts.Store.Usage(req.r.Context(), rule.Policy, key, req.now)
		if err != nil {
			req.err, req.decision = err, "error"
			return storeUnavailable(rule.Policy.Window)
		}
		if i == 0 {
			body.usageBody = newUsageBody(u)
			req.count = u.Count
		}
		if len(rules) > 1 {
			body.Policies = append(body.Policies, newPolicyBody(u))
		}
	}
	req.decision = "read"
	return req.ok(body)
}
