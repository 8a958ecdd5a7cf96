// Package httpapi rate-limits any http.Handler: Limit for the common case,
// one policy over everything a handler serves, and Middleware for several
// policies, each over its own routes, keyed and costed as you say.
//
// An allowed request reaches the handler with the RateLimit,
// RateLimit-Policy and X-RateLimit-* headers set, and its Outcome on its
// context (OutcomeFrom); a rejected one gets an RFC 9457 Problem Details
// 429 with Retry-After, and never reaches it. It is the same answer the
// service's own GET /ping gives: both are one engine (internal/service).
//
// The package is quiet: it logs a line per request only to a logger you
// give (Options.Logger).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
)

// A KeyFunc finds a request's client key for a policy: the source IP
// (BySourceIP), a header (ByHeader), a JWT claim (ByClaim), or your own (a
// session, an API key looked up in a database). An error that is a
// *Problem (Unauthenticated, BadRequest) is answered as it is, when its
// Status is a 4xx or 5xx (any other is a bug, answered 500); any other
// error is logged and answered with a 400 invalid-client-key problem that
// does not repeat it.
type KeyFunc func(*http.Request) (string, error)

// A CostFunc says what a request costs under a policy (the size of an
// upload, the number of items in a batch), at least 1. An error is
// answered as a KeyFunc's is (400 invalid-request). A cost more than an
// enforced policy can ever let through is refused with 400, counting
// nothing.
type CostFunc func(*http.Request) (int64, error)

// Metrics records what is decided; *metrics.EMF writes it as CloudWatch
// Embedded Metric Format lines.
type Metrics interface {
	// Decision records one policy's decision of one request (allowed,
	// rejected, shadow_rejected) under a tier (a configured tier's name,
	// or "default" for the policy's own limit), and how long the store
	// took (metrics.NoLatency for a decision made from memory).
	Decision(at time.Time, policy, tier, route, decision string, latency time.Duration)
	// StoreError records a request the store failed to decide, with the
	// failure's class (busy, unavailable, corrupt, schema, journal_mode).
	StoreError(at time.Time, route, fault string)
}

// Options configure a Middleware.
type Options struct {
	// Store keeps the counts: memory.New() in one process, sqlite.Open
	// for processes that share a file, dynamodb.Open for a table. Required.
	Store limiter.Store
	// Rules are the policies that apply to requests: which routes each
	// guards (ServeMux patterns), how it finds its key, what a request
	// costs.
	Rules []limiter.Rule
	// Keys and Costs, by policy name, find a policy's key and cost with a
	// function of the request instead of its KeySource and Cost.
	Keys  map[string]KeyFunc
	Costs map[string]CostFunc
	// Tiers, by policy name, say which of the policy's tiers a request is
	// on (Policy.Tiers), instead of its rule's TierClaim or TierHeader: a
	// plan looked up by the caller's API key, say. A name the policy does
	// not list, or "", is the policy's own limit. An error that is a
	// *Problem is answered as it is; any other is logged, and the request
	// gets the policy's own limit.
	Tiers map[string]func(*http.Request) (string, error)
	// Metrics receives what is decided; nil, or a nil pointer, records
	// nothing.
	Metrics Metrics
	// FailMode says what a request gets when the store fails: FailClosed
	// (the default) a 503, FailOpen the handler, uncounted.
	FailMode limiter.FailMode
	// Now reads the clock, once per request. Defaults to time.Now.
	Now func() time.Time
	// Logger receives one line per request a rule guards (a route none
	// guards passes through unlogged): method, path, status, key,
	// decision, counts, latency, and a store error with its class. Nil
	// logs nothing.
	Logger *slog.Logger
}

// Middleware returns a wrapper for any http.Handler that rate-limits the
// requests its policies' routes match: every policy whose routes match a
// request counts it, all in one store transaction, under its key (its
// KeySource, or Keys' function) at its cost (its Cost, or Costs'
// function). An allowed request reaches the handler with the rate limit
// headers set and its Outcome on its context (OutcomeFrom); a rejected one
// gets the 429 Problem Details with Retry-After, and never reaches it.
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
// lets the request through, uncounted. A panic of the handler is not the
// middleware's: it lets the panic go on, to your recovery or net/http's.
//
// It fails with every problem in one error: no store (nil, or a nil
// pointer of a store's type), no rules, a rule with no routes, an invalid
// policy, policies that would share counters (limiter.ValidateRules), a
// key source or fail mode of no kind, a constant cost no request could
// pass, a route pattern http.ServeMux refuses or whose host no request
// could match (a request's host is matched without its port, in lower
// case, without a trailing dot), a key, cost or tier function that is nil
// or for no policy, a policy with both a Cost and a CostFunc, a tier
// function for a policy without tiers or beside its rule's TierClaim or
// TierHeader, a policy with tiers that neither its rule nor a tier
// function names.
func Middleware(opts Options) (func(http.Handler) http.Handler, error) {
	so := service.Options{Store: opts.Store, Rules: opts.Rules, FailMode: opts.FailMode, Now: opts.Now, Logger: opts.Logger}
	if opts.Metrics != nil {
		so.Metrics = opts.Metrics
	}
	if so.Logger == nil {
		so.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Keys != nil {
		so.Keys = map[string]service.KeyFunc{}
		for name, f := range opts.Keys {
			if f != nil {
				so.Keys[name] = service.KeyFunc(f)
			} else {
				so.Keys[name] = nil
			}
		}
	}
	if opts.Costs != nil {
		so.Costs = map[string]service.CostFunc{}
		for name, f := range opts.Costs {
			if f != nil {
				so.Costs[name] = service.CostFunc(f)
			} else {
				so.Costs[name] = nil
			}
		}
	}
	if opts.Tiers != nil {
		so.Tiers = map[string]service.TierFunc{}
		for name, f := range opts.Tiers {
			so.Tiers[name] = f // nil stays nil, and is refused
		}
	}
	return service.Middleware(so)
}

// OutcomeFrom is the decision of the request whose context ctx is, for a
// handler behind Middleware or Limit: every policy's count, remaining and
// reset. It reports false for a request that nothing counted.
func OutcomeFrom(ctx context.Context) (limiter.Outcome, bool) { return service.OutcomeFrom(ctx) }

// Problem is an RFC 9457 Problem Details object: Type, Title, Status,
// Detail and Instance, and for a 429 the Policies that hold the client
// back. A KeyFunc or CostFunc returns one (Unauthenticated, BadRequest) to
// answer with it; its Status must be a 4xx or 5xx, or the answer is a 500.
type Problem = service.Problem

// Unauthenticated is the 401 answer, with WWW-Authenticate: Bearer, for a
// KeyFunc that finds no signed-in caller: its detail is sent as it is.
func Unauthenticated(detail string) *Problem { return service.Unauthenticated(detail) }

// BadRequest is the 400 invalid-request answer, for a KeyFunc or CostFunc
// that finds the request malformed: its detail is sent as it is.
func BadRequest(detail string) *Problem { return service.BadRequest(detail) }

// Problem types the middleware answers with, for clients to switch on.
const (
	TypeRateLimited      = service.TypeRateLimited
	TypeStoreUnavailable = service.TypeStoreUnavailable
	TypeInvalidKey       = service.TypeInvalidKey
	TypeInvalidRequest   = service.TypeInvalidRequest
	TypeUnauthenticated  = service.TypeUnauthenticated
)
