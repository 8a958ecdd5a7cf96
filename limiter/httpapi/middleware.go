package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/ft251/ratelimit/limiter"
)

// Middleware returns a wrapper for any http.Handler that rate-limits the
// requests its policies' routes match, as /ping is limited: every policy
// whose routes match a request counts it, all in one store transaction,
// under its key (its KeySource, or Keys' function) at its cost (its Cost,
// or Costs' function). An allowed request reaches the handler with the
// RateLimit, RateLimit-Policy and X-RateLimit-* headers set, and its
// Outcome on its context (OutcomeFrom); a rejected one gets the 429
// Problem Details with Retry-After that /ping gives, and never reaches it.
// Requests no route matches pass through untouched. When the store fails,
// limiter.FailClosed answers 503, limiter.FailOpen lets the request
// through, uncounted. Each counted request logs one line, as the API's do.
// A panic of the handler is not the middleware's: it logs the line and
// lets the panic go on, to your recovery or net/http's.
//
// It fails for what New would panic for, with every problem in one error:
// no store, no rules, a rule with no routes, an invalid policy, policies
// that would share counters (limiter.ValidateRules), a key source or fail
// mode of no kind, a constant cost no request could pass, a route pattern
// http.ServeMux refuses, a key or cost function that is nil or for no
// policy, a policy with both a Cost and a CostFunc.
func Middleware(opts Options) (func(http.Handler) http.Handler, error) {
	e, err := newEngine(opts)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	return func(next http.Handler) http.Handler { return &guarded{engine: e, next: next} }, nil
}

// guarded is a handler behind the middleware.
type guarded struct {
	*engine
	next http.Handler
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rules, route, redirect := g.routing(r)
	switch {
	case redirect != nil:
		// Not the route yet: redirected as ServeMux would, whatever the
		// handler behind, and counted once it arrives.
		redirect.ServeHTTP(w, r)
		return
	case len(rules) == 0:
		g.next.ServeHTTP(w, r)
		return
	}
	req := g.begin(w, r)
	defer g.finish(req)
	checks, err := g.checks(req, rules)
	if err != nil {
		req.fail(err)
		return
	}
	if len(checks) == 0 {
		req.decision = "uncounted"
		req.pass(g.next, r)
		return
	}
	o, err := g.allow(req, route, checks)
	if err != nil {
		if err := g.undecided(req, err, checks[0].Policy.Window); err != nil {
			req.fail(err)
		} else {
			req.pass(g.next, r)
		}
		return
	}
	setRateLimitHeaders(req.w.Header(), req.now, o.Decisions)
	if !o.Allowed {
		req.fail(rateLimited(o))
		return
	}
	req.pass(g.next, r.WithContext(context.WithValue(r.Context(), outcomeKey{}, o)))
}

// pass hands the request to the handler behind the middleware.
func (req *request) pass(next http.Handler, r *http.Request) {
	req.passed = true
	next.ServeHTTP(req.w, r)
}

type outcomeKey struct{}

// OutcomeFrom is the decision of the request whose context ctx is, for a
// handler behind Middleware: every policy's count, remaining and reset. It
// reports false for a request that nothing counted.
func OutcomeFrom(ctx context.Context) (limiter.Outcome, bool) {
	o, ok := ctx.Value(outcomeKey{}).(limiter.Outcome)
	return o, ok
}
