package service

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// The admin routes: per-key overrides and resets, by policy name and key.
// {key} is one path segment, percent-encoded as needed (a "/" as %2F).
const (
	adminOverride = "/admin/overrides/{policy}/{key}"
	adminCounters = "/admin/counters/{policy}/{key}"
)

// adminRoutes serves the admin API: set, read and delete a key's override
// under a policy, and reset its counters. Every action logs one line with
// who asked (the IAM principal behind API Gateway), when, what, and the
// state before and after.
func (a *API) adminRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT "+adminOverride, a.adminAction(a.putOverride))
	mux.HandleFunc("GET "+adminOverride, a.adminAction(a.getOverride))
	mux.HandleFunc("DELETE "+adminOverride, a.adminAction(a.deleteOverride))
	mux.HandleFunc("DELETE "+adminCounters, a.adminAction(a.resetCounters))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.EscapedPath(); cleanPath(p) != p {
			// ServeMux would redirect to the cleaned path: an admin
			// client is told the path it sent is not a route instead,
			// and nothing is changed at an address it did not name.
			requestFrom(r.Context()).fail(notFound(r))
			return
		}
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r) // which sets the path's values; Handler does not
			return
		}
		// Not one of the routes: as Problem Details, the 405 with the
		// methods the path takes (which ServeMux's own answer lists).
		probe := &headerProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		req := requestFrom(r.Context())
		if probe.status != http.StatusMethodNotAllowed {
			req.fail(notFound(r))
			return
		}
		req.fail(methodNotAllowed(r.URL.Path, probe.header.Get("Allow")))
	})
}

// cleanPath is p as ServeMux cleans it before matching: no empty, "." or
// ".." segments, the trailing slash kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// headerProbe records what a handler would answer, and discards it.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(status int)      { p.status = status }

// adminTarget is what an admin route acts on.
type adminTarget struct {
	policy limiter.Policy
	key    string
}

// adminAction turns an admin action into a handler: it finds the policy (404 if
// none is configured by that name) and the key (400 if it is not a valid
// client key), runs the action, and answers its error as a problem.
func (a *API) adminAction(action func(*request, adminTarget) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req := requestFrom(r.Context())
		p, ok := a.policy(r.PathValue("policy"))
		if !ok {
			req.fail(problem(http.StatusNotFound, TypeBlank, fmt.Sprintf("No policy is named %q.", truncate(r.PathValue("policy"), 100))))
			return
		}
		key := r.PathValue("key")
		if err := limiter.ValidKey(key); err != nil {
			req.fail(refusal(err))
			return
		}
		if strings.Trim(key, " \t") != key {
			// Requests' keys are trimmed (X-Client-Key, /check's key):
			// an override or reset of this one would never apply.
			req.fail(problem(http.StatusBadRequest, TypeInvalidKey, "The key has spaces or tabs around it, which no request's key has."))
			return
		}
		req.key = key
		if err := action(req, adminTarget{policy: p, key: key}); err != nil {
			req.fail(err)
		}
	}
}

// overrideBody is an override as the admin routes send and take it.
type overrideBody struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Limit  int64  `json:"limit"`
	Burst  *int64 `json:"burst,omitempty"`
}

// overrideOf is o's body: burst is the bucket's size that applies, for a
// GCRA policy only.
func overrideOf(t adminTarget, o limiter.Override) overrideBody {
	b := overrideBody{Policy: t.policy.Name, Key: t.key, Limit: o.Limit}
	if t.policy.Algorithm == limiter.GCRA {
		burst := t.policy.With(&o).Capacity()
		b.Burst = &burst
	}
	return b
}

func (a *API) putOverride(req *request, t adminTarget) error {
	var in struct {
		Limit json.RawMessage `json:"limit"`
		Burst json.RawMessage `json:"burst"`
	}
	if err := readJSON(req, &in, badAdmin, `{"limit": 1000}`); err != nil {
		return err
	}
	if in.Limit == nil {
		return badAdmin(`"limit" is required`)
	}
	// Whole numbers in any form JSON writes them, as /check's cost.
	var o limiter.Override
	var bad string
	if o.Limit, bad = wholeMember("limit", in.Limit, math.MinInt64); bad != "" {
		return badAdmin(bad)
	}
	if in.Burst != nil {
		if o.Burst, bad = wholeMember("burst", in.Burst, 1); bad != "" {
			return badAdmin(bad)
		}
	}
	if err := o.Validate(t.policy); err != nil {
		return badAdmin(err.Error())
	}
	cost := a.ruleCost(t.policy.Name)
	if most, tier := overrideCapacity(t.policy, o); most < cost {
		under := ""
		if tier != "" {
			under = " under tier " + tier
		}
		return badAdmin(fmt.Sprintf("under %q each request costs %d, more than the override would ever let through at once%s, %d", t.policy.Name, cost, under, most))
	}
	before, err := a.opts.Store.SetOverride(req.r.Context(), t.policy, t.key, o)
	if err != nil {
		return a.writeFailed(req, t, "set override", err)
	}
	a.audit(req, t, "set override", overrideState(t, before), overrideOf(t, o))
	return req.ok(overrideOf(t, o))
}

func (a *API) getOverride(req *request, t adminTarget) error {
	o, err := a.opts.Store.Override(req.r.Context(), t.policy, t.key)
	switch {
	case err != nil:
		return a.adminFailed(req, t, err)
	case o == nil:
		req.verdict = read
		return problem(http.StatusNotFound, TypeBlank, fmt.Sprintf("Key %q has no override under %q.", truncate(t.key, 100), t.policy.Name))
	}
	req.verdict = read
	return req.ok(overrideOf(t, *o))
}

func (a *API) deleteOverride(req *request, t adminTarget) error {
	before, err := a.opts.Store.DeleteOverride(req.r.Context(), t.policy, t.key)
	if err != nil {
		return a.writeFailed(req, t, "delete override", err)
	}
	a.audit(req, t, "delete override", overrideState(t, before), nil)
	return req.noContent()
}

func (a *API) resetCounters(req *request, t adminTarget) error {
	ctx := req.r.Context()
	before, err := a.opts.Store.Usage(ctx, t.policy, t.key, req.now)
	if err == nil {
		err = a.opts.Store.Reset(ctx, t.policy, t.key, req.now)
	}
	if err != nil {
		// A reset that failed may have deleted some of what it meant to
		// (DynamoDB's deletes whose answers were lost), and one whose read
		// failed cannot say what it found: logged as any failed write is.
		return a.writeFailed(req, t, "reset counters", err)
	}
	a.audit(req, t, "reset counters", map[string]any{"count": before.Count, "remaining": before.Remaining}, map[string]any{"count": 0})
	return req.noContent()
}

// overrideCapacity is the least capacity o leaves p's keys, under p's own
// limit or any of its tiers (an override keeps the tier's burst when it
// sets none), and the tier it is least under ("" for the policy's own).
func overrideCapacity(p limiter.Policy, o limiter.Override) (int64, string) {
	least, tier := p.With(&o).Capacity(), ""
	for _, name := range slices.Sorted(maps.Keys(p.Tiers)) {
		if c := decide.Tiered(p, name).With(&o).Capacity(); c < least {
			least, tier = c, name
		}
	}
	return least, tier
}

// ruleCost is what one request costs under the policy named name, by its
// rule's constant cost (1 when it has none).
func (a *API) ruleCost(name string) int64 {
	if r := a.rule(name); r != nil {
		return max(r.Cost, 1)
	}
	return 1
}

// overrideState is an override for the log line; nil when there is none.
func overrideState(t adminTarget, o *limiter.Override) any {
	if o == nil {
		return nil
	}
	return overrideOf(t, *o)
}

// audit fills the request's log line with the admin action: who, when,
// what, and the state before and after.
func (a *API) audit(req *request, t adminTarget, action string, before, after any) {
	who := req.caller.Principal
	if who == "" {
		who = "unsigned request from " + req.caller.SourceIP
	}
	req.verdict = admin
	req.admin = map[string]any{
		"action": action, "policy": t.policy.Name, "key": t.key, "by": who,
		"at": req.now.UTC().Format(time.RFC3339Nano), "before": before, "after": after,
	}
}

// adminFailed answers a store failure: a 503, whatever the fail mode, as
// for /status: there is nothing to let through.
func (a *API) adminFailed(req *request, t adminTarget, err error) error {
	req.err, req.verdict = err, failed
	return storeUnavailable(t.policy.Window)
}

// unknown is a log line's before and after when they cannot be known.
const unknown = "unknown"

// writeFailed answers a failed override write or reset as adminFailed
// does, and logs the action with before and after "unknown": a write whose
// answer is an error may still have been made (DynamoDB: its answers lost
// until the budget ran out), and the store said nothing of what it
// replaced.
func (a *API) writeFailed(req *request, t adminTarget, action string, err error) error {
	a.audit(req, t, action, unknown, unknown)
	return a.adminFailed(req, t, err)
}

func badAdmin(why string) *Problem {
	return problem(http.StatusBadRequest, TypeInvalidRequest, "The request is not acceptable: "+why+".")
}
