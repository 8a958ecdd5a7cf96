// Package service is this service's HTTP API, and the engine it shares
// with the public middleware (limiter/httpapi, a view of Middleware here).
//
// The API (New) serves GET /ping, limited per client key, GET /status,
// which reads a key's counters, POST /check, a decision for any service
// in any language, and, when enabled, the admin routes under /admin/. The
// same handler serves the Lambda functions (through the API Gateway proxy,
// see limiter/awslambda) and the local server, so both answer alike.
//
// The engine (engine.go) finds the rules a request matches, its keys and
// costs, has the store decide, and answers: the rate limit headers, the
// 429, the fail mode. Every error is answered with RFC 9457 Problem
// Details, written in one place (problem.go) from one table of the
// domain's errors (errors.go); no request path panics or leaks internals,
// and a panic that escapes a bug anyway is recovered into a 500 problem (a
// panic of the handler behind the middleware is that handler's, and goes
// on).
package service

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// Routes served by the API.
const (
	RoutePing   = "/ping"
	RouteStatus = "/status"
	RouteCheck  = "/check"
	RouteAdmin  = "/admin/"
)

// Metrics records what the API decides; *metrics.EMF writes it as
// CloudWatch Embedded Metric Format lines.
type Metrics interface {
	// Decision records one policy's decision of one request under a tier
	// (a configured tier's name, or "default"), and how long the store
	// took (metrics.NoLatency for a decision made from memory).
	Decision(at time.Time, policy, tier, route, decision string, latency time.Duration)
	// StoreError records a request the store failed to decide, with the
	// failure's class (fault.Class).
	StoreError(at time.Time, route, fault string)
}

var _ Metrics = (*metrics.EMF)(nil)

// A KeyFunc finds a request's client key for a policy, for Go callers whose
// key is not a header, the source IP or a claim (a session, an API key
// looked up in a database). An error that is a *Problem (Unauthenticated,
// BadRequest) is answered as it is; any other is logged and answered with
// a 400 invalid-client-key problem that does not repeat it.
type KeyFunc func(*http.Request) (string, error)

// A CostFunc says what a request costs under a policy (the size of an
// upload, the number of items in a batch), at least 1. An error is
// answered as a KeyFunc's is (400 invalid-request). A cost more than an
// enforced policy can ever let through is refused with 400 before it is
// counted (limiter.ValidateCosts).
type CostFunc func(*http.Request) (int64, error)

// A TierFunc says which of a policy's tiers a request is on (a plan
// looked up by its API key, say): a name the policy does not list, or "",
// is the default tier. An error that is a *Problem is answered as it is;
// any other is logged, and the request gets the default tier.
type TierFunc func(*http.Request) (string, error)

// Options configure an API or the engine's Middleware; every field
// applies to both, but Routes, the API's own routes.
type Options struct {
	Store limiter.Store
	// Rules are the policies that apply to requests: which routes each
	// guards (ServeMux patterns), how it finds its key, what a request
	// costs.
	Rules []limiter.Rule
	// Keys and Costs, by policy name, find a policy's key and cost with a
	// function of the request instead of its KeySource and Cost.
	Keys  map[string]KeyFunc
	Costs map[string]CostFunc
	// Tiers, by policy name, find a policy's tier with a function of the
	// request instead of its rule's TierClaim or TierHeader.
	Tiers map[string]TierFunc
	// Metrics receives what is decided; nil records nothing.
	Metrics Metrics
	// FailMode says what a request gets when the store fails.
	FailMode limiter.FailMode
	// Routes lists the API's routes to serve (RoutePing, RouteStatus,
	// RouteCheck, RouteAdmin); others answer 404. Middleware ignores it. Empty means /ping,
	// /status and /check: the admin routes are served only when named.
	Routes []string
	// Now reads the clock, once per request. Defaults to time.Now.
	Now func() time.Time
	// Caller tells what the platform knows about a request. Defaults to
	// what the platform adapter in front says (awslambda.HTTP sets
	// its caller on each request's context, see WithCaller), else to
	// what a direct TCP connection tells.
	Caller func(*http.Request) Caller
	// Logger receives one line per request. Defaults to slog.Default().
	Logger *slog.Logger
}

// API serves the rate limiter's routes.
type API struct {
	*engine
	routes map[string]route
	admin  http.Handler // nil unless RouteAdmin is served
	// limiter decides POST /check's attempts.
	limiter *limiter.Limiter
}

// route is one of the API's routes: the method it takes and its handler.
type route struct {
	method string
	handle func(*request) error
}

// New returns the API described by opts, or every problem with them in
// one error: those Middleware refuses, and a route it does not serve.
func New(opts Options) (*API, error) {
	e, err := newEngine(opts)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if len(e.opts.Routes) == 0 {
		e.opts.Routes = []string{RoutePing, RouteStatus, RouteCheck}
	}
	a := &API{engine: e, routes: map[string]route{}, limiter: &limiter.Limiter{Store: e.opts.Store, Policies: e.policies()}}
	for _, name := range e.opts.Routes {
		switch name {
		case RoutePing:
			a.routes[name] = route{http.MethodGet, a.ping}
		case RouteStatus:
			a.routes[name] = route{http.MethodGet, a.status}
		case RouteCheck:
			a.routes[name] = route{http.MethodPost, a.check}
		case RouteAdmin:
			a.admin = a.adminRoutes()
		default:
			return nil, fmt.Errorf("service: unknown route %q", name)
		}
	}
	// Last: a New that fails leaves no claim behind.
	if err := claimNamespaces(e.opts); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	return a, nil
}

// ServeHTTP routes the request, answers errors with Problem Details, and
// logs one line. A HEAD of a GET route is answered as its GET, counted as
// the GET would be, with the same status and headers and no body: what
// RFC 9110 (section 9.3.2) asks of HEAD, what ServeMux does for a GET
// pattern (and so for the admin routes and for a rule's "GET /ping"), and
// what the Allow of a GET route, "GET, HEAD", promises. (The template
// declares GET routes only: a HEAD reaches the function only if API
// Gateway passes it on.)
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := a.begin(w, r)
	defer a.finish(req)
	req.w.head = r.Method == http.MethodHead
	if a.admin != nil && strings.HasPrefix(r.URL.Path, RouteAdmin) {
		req.serve(a.admin)
		return
	}
	rt, ok := a.routes[r.URL.Path]
	var err error
	switch {
	case !ok:
		err = notFound(r)
	case r.Method == http.MethodHead && rt.method == http.MethodGet:
		err = rt.handle(req)
	case r.Method != rt.method:
		allow := rt.method
		if allow == http.MethodGet {
			allow += ", " + http.MethodHead
		}
		err = methodNotAllowed(r.URL.Path, allow)
	default:
		err = rt.handle(req)
	}
	if err != nil {
		req.fail(err)
	}
}

func notFound(r *http.Request) *Problem {
	path, cut := requestPath(r)
	if cut {
		path += "…"
	}
	return problem(http.StatusNotFound, TypeBlank, "No route for "+path+".")
}

// begin starts a request's bookkeeping: its instant, read once, and what
// the platform knows of it.
func (e *engine) begin(w http.ResponseWriter, r *http.Request) *request {
	req := &request{w: &recorder{ResponseWriter: w}, r: r, caller: e.callerOf(r), now: e.opts.Now(), start: time.Now()}
	if req.caller.RequestID == "" {
		req.caller.RequestID = newRequestID()
	}
	return req
}

// finish recovers a panic into a 500 problem (unless the answer was already
// on its way) and logs the request's line. http.ErrAbortHandler, a
// handler's way to abort its response on purpose, is passed on, as is a
// panic of the handler behind the middleware: it is that handler's to
// recover, or net/http's.
func (e *engine) finish(req *request) {
	if v := recover(); v != nil {
		if v == http.ErrAbortHandler || req.passed {
			req.panicked = v != http.ErrAbortHandler // the handler's, not an abort it meant
			e.log(req)
			panic(v)
		}
		e.opts.Logger.Error("panic", "panic", v, "stack", string(debug.Stack()))
		if !req.w.wrote {
			req.fail(nil)
		}
	}
	e.log(req)
}
