package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"

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
// Requests no route matches pass through untouched.
//
// Which requests a route matches, and which are redirected first, is
// decided by the handler wrapped. An *http.ServeMux itself (not a handler
// around one) routes for itself, as it would alone: a request it would
// redirect (to a cleaned path, or "/docs" to its subtree "/docs/") passes
// through to that redirect, uncounted, and the request that follows is
// counted when it arrives; any other is counted by the rules whose
// patterns match it as it is, so the mux's own "/api" beside a rule's
// "/api/" reaches its handler uncounted, never redirected, and a path the
// mux answers 404 is counted if a rule matches it. For any other handler,
// whose routing cannot be told, the rules alone decide: a request their
// patterns would redirect ("/api" for a rule's "/api/", "//orders" for
// "POST /orders") gets that redirect, uncounted, so that the handler never
// serves "//orders" as "/orders" without the limit.
//
// When the store fails, limiter.FailClosed answers 503, limiter.FailOpen
// lets the request through, uncounted. Each counted request logs one
// line, as the API's do.
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
	return func(next http.Handler) http.Handler {
		g := &guarded{engine: e, next: next}
		g.mux, _ = next.(*http.ServeMux)
		return g
	}, nil
}

// guarded is a handler behind the middleware.
type guarded struct {
	*engine
	next http.Handler
	// mux is next when it is a ServeMux, which routes for itself.
	mux *http.ServeMux
	// patterns are one-pattern ServeMuxes of mux's patterns, by pattern:
	// as many as mux has.
	patterns sync.Map
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rules, route, redirect := g.routing(r)
	if g.mux != nil {
		if g.redirects(r) {
			// Not the route yet, as the mux would redirect it alone: its
			// redirect, and the request that follows is counted.
			g.next.ServeHTTP(w, r)
			return
		}
		// Served as the mux routes it: the rules' own redirect (their
		// "/api/" for its "/api") is not its business.
		redirect = nil
	}
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

// redirects reports whether g.mux would answer r with a redirect of its
// own: to the cleaned path, or to a subtree's trailing slash (which its
// Handler tells by the pattern it names, one that does not match r's path
// itself but the path with a slash).
func (g *guarded) redirects(r *http.Request) bool {
	if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && cleanPath(p) != p {
		return true
	}
	_, pattern := g.mux.Handler(r)
	if pattern == "" {
		return false // a 404 or 405 of the mux's
	}
	one, ok := g.patterns.Load(pattern)
	if !ok {
		mux, err := compileRoutes([]string{pattern})
		if err != nil {
			return false // a pattern the mux took parses; never here
		}
		one, _ = g.patterns.LoadOrStore(pattern, mux)
	}
	h, _ := one.(*http.ServeMux).Handler(r)
	return h != matched{}
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
