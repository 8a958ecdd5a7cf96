package httpapi

import (
	"net/http"
	"net/url"
	"strings"

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
	req.key = key
	u, err := a.opts.Store.Usage(req.r.Context(), a.opts.Policy, key, req.now)
	if err != nil {
		req.err, req.decision = err, "error"
		return storeUnavailable(a.opts.Policy.Window)
	}
	req.decision, req.count = "read", u.Count
	return req.ok(newUsageBody(u))
}
