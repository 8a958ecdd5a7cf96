package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/ft251/ratelimit/limiter"
)

// Middleware is httpapi.Middleware, whose doc says what it does, on the
// service's options.
func Middleware(opts Options) (func(http.Handler) http.Handler, error) {
	e, err := newEngine(opts)
	if err := errors.Join(err, unnamedTiers(opts)); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	if err := claimNamespaces(e.opts); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	return func(next http.Handler) http.Handler {
		g := &guarded{engine: e, next: next}
		g.mux, _ = next.(*http.ServeMux)
		return g
	}, nil
}

// unnamedTiers is what the middleware refuses beside what newEngine does:
// a policy with tiers and nothing that names one of them (no TierClaim,
// TierHeader or tier function), whose every request would get the
// policy's own limit, whatever its plan, without a word. The API takes
// such a policy, since POST /check names its tier.
func unnamedTiers(opts Options) error {
	var errs []error
	for _, r := range opts.Rules {
		if _, named := opts.Tiers[r.Policy.Name]; len(r.Policy.Tiers) > 0 && !named && r.TierClaim == "" && r.TierHeader == "" {
			errs = append(errs, fmt.Errorf("policy %q has tiers, but nothing names one: give its rule a TierClaim or a TierHeader, or Options.Tiers a function for it", r.Policy.Name))
		}
	}
	return errors.Join(errs...)
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
	charges, err := g.chargesOf(req, rules)
	if err != nil {
		req.fail(err)
		return
	}
	if len(charges) == 0 {
		req.verdict = uncounted
		req.pass(g.next, r)
		return
	}
	o, err := g.allow(req, route, charges)
	if err != nil {
		if err := g.undecided(req, err, charges[0].Policy.Window); err != nil {
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
