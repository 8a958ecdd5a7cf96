package limiter

import (
	"errors"
	"fmt"
)

// validatePolicies reports what is wrong with policies as one
// configuration over one store: each policy's own problems; names used
// twice, which responses and overrides could not tell apart; namespaces
// used twice (at most one policy may leave its namespace empty), which
// would make policies count in each other's counters; more than
// maxPolicies.
func validatePolicies(policies []Policy) error {
	var errs []error
	for _, p := range policies {
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, asSet(policies)...)...)
}

// asSet is what is wrong with policies as a set, each one aside.
func asSet(policies []Policy) []error {
	var errs []error
	if len(policies) > maxPolicies {
		errs = append(errs, fmt.Errorf("%d policies, more than %d", len(policies), maxPolicies))
	}
	names := map[string]bool{}
	namespaces := map[string]string{}
	for _, p := range policies {
		if names[p.Name] {
			errs = append(errs, fmt.Errorf("policy %q is named twice", p.Name))
			continue
		}
		names[p.Name] = true
		if other, ok := namespaces[p.Namespace]; ok {
			errs = append(errs, fmt.Errorf("policies %q and %q share the namespace %q, and would count in each other's counters: give each its own (POLICIES uses the name)", other, p.Name, p.Namespace))
		}
		namespaces[p.Namespace] = p.Name
	}
	return errs
}
