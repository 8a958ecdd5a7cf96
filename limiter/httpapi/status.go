package httpapi

import (
	"net/http"
	"net/url"

	"github.com/ft251/ratelimit/limiter"
)

// status reads the counter of ?key= without counting anything. A store
// failure is a 503 whatever the fail mode: there is nothing to let through.
func (a *API) status(req *request) error {
	q, err := url.ParseQuery(req.r.URL.RawQuery)
	if err != nil {
		return problem(http.StatusBadRequest, TypeInvalidQuery, "The query string is malformed.")
	}
	keys := q["key"]
	switch {
	case len(keys) == 0 || keys[0] == "":
		return problem(http.StatusBadRequest, TypeInvalidQuery, "The query parameter 'key' is required, e.g. /status?key=alice.")
	case len(keys) > 1:
		return problem(http.StatusBadRequest, TypeInvalidQuery, "The query parameter 'key' is given more than once.")
	}
	if err := limiter.ValidKey(keys[0]); err != nil {
		return invalidKey(err)
	}
	req.key = keys[0]
	u, err := a.opts.Store.Usage(req.r.Context(), a.opts.Policy, keys[0], req.now)
	if err != nil {
		req.err, req.decision = err, "error"
		return storeUnavailable(a.opts.Policy.Window)
	}
	req.decision, req.count = "read", u.Count
	return req.ok(newUsageBody(u))
}
