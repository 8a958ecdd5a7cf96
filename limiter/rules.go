package limiter

import (
	"errors"
	"fmt"

	"github.com/ft251/ratelimit/internal/fieldname"
)

// Rule is a policy and where it applies: the routes it limits, how each
// request's key is found, and what a request costs.
type Rule struct {
	Policy    Policy
	KeySource KeySource
	// Routes are Go 1.22 http.ServeMux patterns ("GET /orders/{id}",
	// "POST /upload", "/api/"): a request one of them matches is counted
	// under the policy. Checking them is the HTTP layer's part: the domain
	// knows no HTTP.
	Routes []string
	// Cost is what each request counts as; zero means 1.
	Cost int64
	// TierClaim and TierHeader say where a request names its tier, for a
	// policy with Tiers: the JWT authorizer's claim so named, or the
	// header so named, which any client can set (trust it only behind
	// something that sets it). At most one of them; with neither, only a
	// function of the HTTP layer's, or a check that names its tier, picks
	// one. A request that names no tier gets the default tier.
	TierClaim  string
	TierHeader string
}

// Validate reports what is wrong with r, apart from its routes, which are
// the HTTP layer's to check: its policy, its key source, its cost, which
// no attempt could pass above the policy's capacity or any of its tiers',
// and its tier source.
func (r Rule) Validate() error {
	errs := []error{r.Policy.Validate()}
	if err := r.KeySource.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("policy %q: %w", r.Policy.Name, err))
	}
	if len(r.Routes) == 0 {
		// POLICIES gives a rule ["/ping"] when it names none; a rule built
		// in Go with none would guard nothing, silently.
		errs = append(errs, fmt.Errorf("policy %q: no routes: a rule counts only the requests its routes match", r.Policy.Name))
	}
	// A capacity below 1 is its limit's error, said above, not the cost's.
	switch most := r.Policy.leastCapacity(); {
	case r.Cost < 0:
		errs = append(errs, fmt.Errorf("policy %q: cost %d is below 1", r.Policy.Name, r.Cost))
	case most >= 1 && r.Cost > most:
		errs = append(errs, fmt.Errorf("policy %q: cost %d is not from 1 to %d, the most one request can pass (under every tier)", r.Policy.Name, r.Cost, most))
	}
	return errors.Join(append(errs, r.tierSourceErrors()...)...)
}

// tierSourceErrors are what is wrong with where r finds a request's
// tier: both a claim and a header; a claim name no authorizer's claim
// has (as KeySource checks one); a header name that is not an HTTP
// field name; a source for a policy without tiers, which would pick
// nothing.
func (r Rule) tierSourceErrors() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("policy %q: "+format, append([]any{r.Policy.Name}, args...)...))
	}
	switch {
	case r.TierClaim != "" && r.TierHeader != "":
		bad("a tier comes from a claim (%q) or a header (%q), not both", r.TierClaim, r.TierHeader)
	case r.TierClaim != "":
		if err := (KeySource{Kind: KeyFromClaim, Claim: r.TierClaim}).Validate(); err != nil {
			bad("tier %v", err)
		}
	case r.TierHeader != "":
		if !fieldname.Valid(r.TierHeader) {
			bad("tier header %q is not 1 to 128 letters, digits and !#$%%&'*+-.^_`|~", r.TierHeader)
		}
	}
	if (r.TierClaim != "" || r.TierHeader != "") && len(r.Policy.Tiers) == 0 {
		bad("a tier source, but no tiers to choose from")
	}
	return errs
}

// ValidateRules reports what is wrong with rules as one configuration:
// each rule, and their policies together (two with one name or one
// namespace, more than 32).
func ValidateRules(rules []Rule) error {
	policies := make([]Policy, len(rules))
	var errs []error
	for i, r := range rules {
		policies[i] = r.Policy
		if err := r.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, asSet(policies)...)
	return errors.Join(errs...)
}
