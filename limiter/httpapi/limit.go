package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/ft251/ratelimit/internal/fieldname"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
)

// Limit returns a wrapper that rate-limits everything the handler it wraps
// serves under one policy, each request counted once under the key that
// key finds: the common case of Middleware, with no routes to repeat. It
// answers as Middleware does (the same headers, 429, fail mode closed) and
// refuses what Middleware refuses: no store, an invalid policy, a nil key
// function, and a policy with tiers, which nothing here could name. For
// several policies, routes, costs, tiers, a log line or fail open, use
// Middleware. A policy without a Namespace counts under the client key
// itself, so a store takes one such policy: a second Limit on it with
// another policy needs a Namespace for one of them.
//
//	limit, err := httpapi.Limit(store, limiter.Policy{Name: "api", Limit: 100, Window: time.Minute}, httpapi.BySourceIP)
//	...
//	http.ListenAndServe(":8080", limit(mux))
func Limit(store limiter.Store, p limiter.Policy, key KeyFunc) (func(http.Handler) http.Handler, error) {
	rule := limiter.Rule{Policy: p, Routes: []string{"/"}}
	keys := map[string]KeyFunc{p.Name: key}
	var noKey error
	if key == nil {
		// Said in Limit's terms, not as Options.Keys, which its caller
		// never wrote; the rest is checked with a key source in its place.
		noKey = errors.New("httpapi: the key function is nil: give BySourceIP, ByHeader(name), ByClaim(name) or your own")
		rule.KeySource, keys = limiter.KeySource{Kind: limiter.KeyFromSourceIP}, nil
	}
	mw, err := Middleware(Options{Store: store, Rules: []limiter.Rule{rule}, Keys: keys})
	if err := errors.Join(noKey, err); err != nil {
		return nil, err
	}
	return mw, nil
}

// BySourceIP keys a request by the address it came from: the TCP peer, or
// behind API Gateway (limiter/awslambda) the source IP API Gateway saw.
// Never X-Forwarded-For, which any client can write.
func BySourceIP(r *http.Request) (string, error) {
	return service.KeyOf(r, limiter.KeySource{Kind: limiter.KeyFromSourceIP})
}

// ByHeader keys a request by the header name, for a header something in
// front of you sets (an API key a gateway checked): any client can send
// any header. A request without it is answered 400. It panics if name is
// not a header name (RFC 9110's token, up to 128 characters), as
// regexp.MustCompile does on a bad pattern: the program is wrong, not its
// requests, which would each be answered 400.
func ByHeader(name string) KeyFunc {
	if !fieldname.Valid(name) {
		panic(fmt.Sprintf("httpapi: ByHeader(%q): not a header name (1 to 128 letters, digits and !#$%%&'*+-.^_`|~)", name))
	}
	return func(r *http.Request) (string, error) { return service.HeaderKey(r, name) }
}

// ByClaim keys a request by a claim of the JWT authorizer in front of the
// API (API Gateway's, through limiter/awslambda), such as "sub". A request
// without it is answered 401. It panics, as ByHeader does, if name is no
// claim's (empty, spaces, control characters, over 128 bytes).
func ByClaim(name string) KeyFunc {
	if err := (limiter.KeySource{Kind: limiter.KeyFromClaim, Claim: name}).Validate(); err != nil {
		panic(fmt.Sprintf("httpapi: ByClaim(%q): %v", name, err))
	}
	return func(r *http.Request) (string, error) {
		return service.KeyOf(r, limiter.KeySource{Kind: limiter.KeyFromClaim, Claim: name})
	}
}
