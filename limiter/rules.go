package limiter

import (
	"errors"
	"fmt"
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
}

// Validate reports what is wrong with r, apart from its routes, which are
// the HTTP layer's to check: its policy, its key source, and its cost,
// which no attempt could pass above the policy's capacity.
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
	if most := r.Policy.Capacity(); r.Cost < 0 || r.Cost > most {
		errs = append(errs, fmt.Errorf("policy %q: cost %d is not from 1 to %d, the most one request can pass", r.Policy.Name, r.Cost, most))
	}
	return errors.Join(errs...)
}

// ValidateRules reports what is wrong with rules as one configuration:
// each rule, and their policies together (validatePolicies).
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
