package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/internal/namespaces"
	"github.com/ft251/ratelimit/internal/typednil"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// engine is what the API and the middleware share: the rules, compiled,
// and how a request's policies are found, decided and answered.
type engine struct {
	opts  Options
	rules []*rule
}

// rule is a limiter.Rule ready to match requests: one of its routes
// matches a request as an http.ServeMux with those patterns would route it.
// A request it would redirect (to a cleaned path, or a subtree's trailing
// slash) is not the route yet: the middleware redirects it as ServeMux
// would, and counts the request that follows, unless the handler behind
// is a ServeMux, which routes for itself (guarded.redirects).
type rule struct {
	limiter.Rule
	mux  *http.ServeMux // the rule's routes, each a pattern of its own
	key  KeyFunc        // nil: Rule.KeySource
	cost CostFunc       // nil: Rule.Cost
	tier TierFunc       // nil: Rule.TierClaim or Rule.TierHeader
}

// compileRoutes is a ServeMux of patterns. A pattern ServeMux refuses (it
// does not parse, or conflicts with another of the rule's) is an error.
func compileRoutes(patterns []string) (mux *http.ServeMux, err error) {
	mux = http.NewServeMux()
	for _, p := range patterns {
		func() {
			defer func() {
				if v := recover(); v != nil {
					// ServeMux names the source lines that registered the
					// patterns: ours, of no use to whoever wrote POLICIES.
					why := registeredAt.ReplaceAllString(fmt.Sprint(v), "")
					err = errors.Join(err, fmt.Errorf("route %q: %s", p, strings.ReplaceAll(why, "\n", " ")))
				}
			}()
			mux.Handle(p, matched{})
			err = errors.Join(err, routeHostError(p))
		}()
	}
	return mux, err
}

// routeHostError is what is wrong with the host of pattern p, one that
// ServeMux took: a request's host is matched without its port (ServeMux
// drops it) and as DNS names are, in lower case without a trailing dot
// (routing makes it so), so a host with a port, a capital or a trailing
// dot would match no request, and the route count nothing.
func routeHostError(p string) error {
	_, host := PatternParts(p)
	want := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		want = h
	}
	if want = canonicalHost(want); want == host {
		return nil
	}
	return fmt.Errorf("route %q: host %q matches no request: write %q (requests' hosts are matched without a port, in lower case, without a trailing dot)", p, host, want)
}

// PatternParts are the method and the host of the ServeMux pattern p,
// "[METHOD ][HOST]/[PATH]", split as ServeMux splits it: the method ends
// at the first space or tab, and a pattern that begins with one has none
// (any method); the host is what comes before the first "/" after it.
// Either is "" where p has none.
func PatternParts(p string) (method, host string) {
	rest := p
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		method, rest = p[:i], strings.TrimLeft(p[i:], " \t")
	}
	host, _, _ = strings.Cut(rest, "/")
	return method, host
}

// matched is the handler of every rule pattern: a request whose handler
// is another is one ServeMux would redirect (to a cleaned path, or to a
// subtree's trailing slash), which is not the route yet, and is not
// counted.
type matched struct{}

func (matched) ServeHTTP(http.ResponseWriter, *http.Request) {}

var registeredAt = regexp.MustCompile(` \(registered at [^)]*\)`)

// Guarding names the rules whose routes match a request of method to host
// ("" for a request that names none of the patterns' hosts) for path, in
// order: the policies that would count it, as the engine matches it. A
// rule whose patterns do not compile guards nothing.
func Guarding(rules []limiter.Rule, method, host, path string) []string {
	r := &http.Request{Method: method, Host: canonicalHost(host), URL: &url.URL{Path: path}}
	var names []string
	for _, rl := range rules {
		mux, err := compileRoutes(rl.Routes)
		if err != nil {
			continue
		}
		if h, _ := mux.Handler(r); h == (matched{}) {
			names = append(names, rl.Policy.Name)
		}
	}
	return names
}

// RouteErrors reports the rules' route patterns that http.ServeMux would
// refuse, one error each.
func RouteErrors(rules []limiter.Rule) []error {
	var errs []error
	for _, r := range rules {
		if _, err := compileRoutes(r.Routes); err != nil {
			errs = append(errs, fmt.Errorf("policy %q: %w", r.Policy.Name, err))
		}
	}
	return errs
}

// newEngine charges opts and fills in their defaults.
func newEngine(opts Options) (*engine, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FailMode == "" {
		opts.FailMode = limiter.FailClosed
	}
	if typednil.Is(opts.Metrics) {
		opts.Metrics = nil // a nil *metrics.EMF records nothing, as nil does
	}
	// The rules are the engine's own from here: a later change to the
	// caller's tiers would skip validation and race with requests.
	opts.Rules = slices.Clone(opts.Rules)
	for i := range opts.Rules {
		opts.Rules[i].Policy.Tiers = maps.Clone(opts.Rules[i].Policy.Tiers)
		opts.Rules[i].Routes = slices.Clone(opts.Rules[i].Routes)
	}
	e := &engine{opts: opts}
	errs := []error{limiter.ValidateRules(opts.Rules), opts.FailMode.Validate()}
	if err := typednil.Missing("store", opts.Store); err != nil {
		// Told with the rest: every problem in one error.
		errs = append([]error{err}, errs...)
	}
	if len(opts.Rules) == 0 {
		errs = append(errs, errors.New("no rules: nothing would be counted"))
	}
	names := map[string]bool{}
	for _, r := range opts.Rules {
		mux, err := compileRoutes(r.Routes)
		if err != nil {
			errs = append(errs, fmt.Errorf("policy %q: %w", r.Policy.Name, err))
		}
		names[r.Policy.Name] = true
		e.rules = append(e.rules, &rule{Rule: r, mux: mux, key: opts.Keys[r.Policy.Name], cost: opts.Costs[r.Policy.Name], tier: opts.Tiers[r.Policy.Name]})
	}
	for name, f := range opts.Keys {
		switch {
		case !names[name]:
			errs = append(errs, fmt.Errorf("Keys names no policy: %q", name))
		case f == nil:
			errs = append(errs, fmt.Errorf("Keys[%q] is nil", name))
		}
	}
	for name, f := range opts.Costs {
		switch {
		case !names[name]:
			errs = append(errs, fmt.Errorf("Costs names no policy: %q", name))
		case f == nil:
			errs = append(errs, fmt.Errorf("Costs[%q] is nil", name))
		}
	}
	for _, r := range opts.Rules {
		if _, ok := opts.Costs[r.Policy.Name]; ok && r.Cost != 0 {
			errs = append(errs, fmt.Errorf("policy %q has both a Cost and a CostFunc: say which", r.Policy.Name))
		}
	}
	return e, errors.Join(append(errs, tierFuncErrors(opts)...)...)
}

// claimNamespaces records each policy of opts as the one that counts in
// its namespace on its store (namespaces), once everything else about opts
// is known to be right: a second Middleware, Limit or Limiter on the store
// with another policy in one of them would count in its counters.
func claimNamespaces(opts Options) error {
	uses := make([]namespaces.Use, len(opts.Rules))
	for i, r := range opts.Rules {
		uses[i] = namespaces.Use{Namespace: r.Policy.Namespace, Name: r.Policy.Name}
	}
	return namespaces.Claim(opts.Store, uses...)
}

// tierFuncErrors are what is wrong with opts.Tiers: a function for no
// policy, or for one without tiers; a nil one; one beside the rule's own
// TierClaim or TierHeader.
func tierFuncErrors(opts Options) []error {
	var errs []error
	for name, f := range opts.Tiers {
		i := slices.IndexFunc(opts.Rules, func(r limiter.Rule) bool { return r.Policy.Name == name })
		switch {
		case i < 0:
			errs = append(errs, fmt.Errorf("Tiers names no policy: %q", name))
		case f == nil:
			errs = append(errs, fmt.Errorf("Tiers[%q] is nil", name))
		case len(opts.Rules[i].Policy.Tiers) == 0:
			errs = append(errs, fmt.Errorf("Tiers[%q]: the policy has no tiers to choose from", name))
		case opts.Rules[i].TierClaim != "" || opts.Rules[i].TierHeader != "":
			errs = append(errs, fmt.Errorf("policy %q has both a TierClaim or TierHeader and a tier function: say which", name))
		}
	}
	return errs
}

// matching are the rules whose routes match r, in configuration order, and
// the first one's matching pattern, which names the route in audit records
// and metrics (a pattern, not the path: a bounded set of values).
func (e *engine) matching(r *http.Request) ([]*rule, string) {
	rules, first, _ := e.routing(r)
	return rules, first
}

// routing is matching, and the redirect ServeMux would answer r with for
// some rule's route, if any: a handler behind the middleware that is not
// a ServeMux might serve "//orders" as "/orders", uncounted (one that is
// redirects for itself, and the middleware leaves the rules' redirect
// out). Hosts are
// matched as DNS names are, without case or a trailing dot.
func (e *engine) routing(r *http.Request) ([]*rule, string, http.Handler) {
	if host := canonicalHost(r.Host); host != r.Host {
		probe := *r
		probe.Host = host
		r = &probe
	}
	var out []*rule
	var first string
	var redirect http.Handler
	for _, rl := range e.rules {
		switch h, pattern := rl.mux.Handler(r); {
		case h == (matched{}):
			out = append(out, rl)
			if first == "" {
				first = pattern
			}
		case pattern != "" && redirect == nil:
			redirect = h
		}
	}
	return out, first, redirect
}

// canonicalHost is host in lower case, without a trailing dot.
func canonicalHost(host string) string {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = host, ""
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if port != "" {
		return net.JoinHostPort(name, port)
	}
	return name
}

// chargesOf are what req is counted under, by rules: each rule's key,
// cost and tier. A shadow rule that cannot find its key (a claim it
// lacks, a key that is not valid) is left out and named in the log line,
// where an enforced one answers 400 or 401: a shadow must not change the
// answer.
func (e *engine) chargesOf(req *request, rules []*rule) ([]limiter.Charge, error) {
	charges := make([]limiter.Charge, 0, len(rules))
	for _, rl := range rules {
		key, err := rl.keyOf(req)
		var cost int64
		if err == nil {
			cost, err = rl.costOf(req)
		}
		var tier string
		if err == nil {
			tier, err = rl.tierOf(req)
		}
		if err != nil && rl.Policy.Shadow {
			req.shadowSkipped = append(req.shadowSkipped, rl.Policy.Name)
			continue
		}
		if err != nil {
			return nil, err
		}
		charges = append(charges, limiter.Charge{Policy: rl.Policy, Key: key, Cost: cost, Tier: tier})
	}
	// A cost no policy could ever let through is refused by the store,
	// which reads the key's overrides in the decision's transaction and
	// counts nothing (decide's ErrInvalidCost).
	return charges, nil
}

// funcProblem is p, the *Problem a caller's key, cost or tier function
// (what) returned under rl, as the request's answer. One without an error
// status is that function's bug, answered 500 (writeError): the line says
// which function and what was wrong.
func (req *request) funcProblem(what string, rl *rule, p *Problem) *Problem {
	if !p.sendable() {
		req.funcErr = append(req.funcErr, fmt.Sprintf("%s of %s: a *Problem with status %d, not 4xx or 5xx: %v", what, rl.Policy.Name, p.Status, p))
	}
	return p
}

// keyOf finds the rule's key in req: by its KeyFunc, or its KeySource.
func (rl *rule) keyOf(req *request) (string, error) {
	if rl.key == nil {
		return clientKey(req.r, req.caller, rl.KeySource)
	}
	key, err := rl.key(req.r)
	var p *Problem
	switch {
	case errors.As(err, &p):
		return "", req.funcProblem("key", rl, p)
	case err != nil:
		req.funcErr = append(req.funcErr, fmt.Sprintf("key of %s: %v", rl.Policy.Name, err))
		return "", problem(http.StatusBadRequest, TypeInvalidKey, "The request's client key cannot be told.")
	}
	if err := limiter.ValidKey(key); err != nil {
		return "", refusal(err)
	}
	return key, nil
}

// costOf is what req costs under the rule: its CostFunc's answer, or
// Rule.Cost. A CostFunc's error is logged, and its text is not sent: it
// may tell what the client should not know.
func (rl *rule) costOf(req *request) (int64, error) {
	if rl.cost == nil {
		return rl.Cost, nil
	}
	cost, err := rl.cost(req.r)
	var p *Problem
	switch {
	case errors.As(err, &p):
		return 0, req.funcProblem("cost", rl, p)
	case err != nil:
		req.funcErr = append(req.funcErr, fmt.Sprintf("cost of %s: %v", rl.Policy.Name, err))
		return 0, problem(http.StatusBadRequest, TypeInvalidRequest, "The request's cost cannot be told.")
	case cost < 1:
		return 0, problem(http.StatusBadRequest, TypeInvalidRequest, fmt.Sprintf("The request's cost, %d, is below 1.", cost))
	}
	return cost, nil
}

// tierOf is the tier req names under the rule: its TierFunc's answer, or
// the rule's TierClaim of the caller's claims, or its TierHeader's raw
// value, trimmed; "" (the default tier) for a request that names none,
// or a tier the policy does not list, so that only configured names go
// further. A TierFunc's *Problem is answered as it is; any other error
// is logged, and the request is counted under the default tier: a plan
// that cannot be told is not the client's fault, and the default is what
// a request without one gets.
func (rl *rule) tierOf(req *request) (string, error) {
	var name string
	switch {
	case rl.tier != nil:
		t, err := rl.tier(req.r)
		var p *Problem
		switch {
		case errors.As(err, &p):
			return "", req.funcProblem("tier", rl, p)
		case err != nil:
			req.funcErr = append(req.funcErr, fmt.Sprintf("tier of %s: %v", rl.Policy.Name, err))
			return "", nil
		}
		name = t
	case rl.TierClaim != "":
		name = req.caller.Claims[rl.TierClaim]
	case rl.TierHeader != "":
		name = strings.Trim(req.caller.header(req.r, rl.TierHeader), " \t")
	}
	if _, ok := rl.Policy.Tiers[name]; !ok {
		return "", nil
	}
	return name, nil
}

// allow counts req's attempt under charges at route, and decides it (see
// decide).
func (e *engine) allow(req *request, route string, charges []limiter.Charge) (limiter.Outcome, error) {
	return e.decide(req, route, charges[0].Key, func(ctx context.Context) (limiter.Outcome, error) {
		return e.opts.Store.Allow(ctx, limiter.Attempt{Charges: charges, Now: req.now, Route: route, RequestID: req.caller.RequestID})
	})
}

// decide has the store decide req (by ask), under key, measuring each
// policy's decision and any store error. A refusal (a cost the key's
// policies could never let through, an unknown policy: counting nothing)
// is returned as its problem; any other error is the store's, for the
// caller to answer with the fail mode (undecided).
func (e *engine) decide(req *request, route, key string, ask func(context.Context) (limiter.Outcome, error)) (limiter.Outcome, error) {
	req.key = key
	began := time.Now()
	ctx, whole := decide.Capture(req.r.Context())
	o, err := ask(ctx)
	latency := time.Since(began)
	if p := refusal(err); p != nil {
		if p.Status >= 500 {
			req.err = err // logged: a bug's cause
		}
		return o, p
	}
	if err != nil {
		req.err = err
		if e.opts.Metrics != nil && !req.cancelled() {
			e.opts.Metrics.StoreError(req.now, route, string(fault.Of(err)))
		}
		return o, err
	}
	req.outcome = &o
	req.count, req.fromMemory = o.Decisions[0].Count, whole.FromMemory
	req.tier = tierLabel(o.Decisions[0].Usage)
	req.verdict = rejected
	if o.Allowed {
		req.verdict = allowed
	}
	if e.opts.Metrics != nil {
		for _, d := range o.Decisions {
			// A denial from memory took no store time: measuring it would
			// pull the latency figures toward zero.
			took := latency
			if whole.FromMemory {
				took = metrics.NoLatency
			}
			e.opts.Metrics.Decision(req.now, d.Policy.Name, tierName(d.Tier), route, decisionName(d), took)
		}
	}
	return o, nil
}

// undecided is the answer to a request whose charges the store did not
// decide, err being decide's error: its problem, for a cost refused; nil
// when the fail mode lets the request through, degraded (never a client
// that has gone: nothing would reach it, and a handler behind the
// middleware would run for nobody); else a 503.
func (e *engine) undecided(req *request, err error, window time.Duration) error {
	if p := (*Problem)(nil); errors.As(err, &p) {
		return p
	}
	if e.opts.FailMode == limiter.FailOpen && !req.cancelled() {
		req.verdict = degraded
		return nil
	}
	req.verdict = failed
	return storeUnavailable(window)
}

// rule is the configured rule of the policy named name, or nil.
func (e *engine) rule(name string) *rule {
	i := slices.IndexFunc(e.rules, func(r *rule) bool { return r.Policy.Name == name })
	if i < 0 {
		return nil
	}
	return e.rules[i]
}

// policy is the configured policy named name.
func (e *engine) policy(name string) (limiter.Policy, bool) {
	if r := e.rule(name); r != nil {
		return r.Policy, true
	}
	return limiter.Policy{}, false
}

// defaultTier names the policy's own limit, where a tier's name goes:
// responses, logs and metrics (limiter reserves the name).
const defaultTier = "default"

// tierName is tier as responses, logs and metrics name it: "default" for
// the policy's own limit. A decision's tier is a configured name or "",
// so a client cannot mint a value.
func tierName(tier string) string {
	if tier == "" {
		return defaultTier
	}
	return tier
}

// tierLabel is u's tier as a response or log line tells it, for a policy
// with tiers; "" (left out) for one without.
func tierLabel(u limiter.Usage) string {
	if len(u.Policy.Tiers) == 0 {
		return ""
	}
	return tierName(u.Tier)
}

type requestKey struct{}

// withRequest carries req on ctx, for the handlers the API hands it to.
func withRequest(ctx context.Context, req *request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

func requestFrom(ctx context.Context) *request {
	req, _ := ctx.Value(requestKey{}).(*request)
	return req
}
