package limiter

import (
	"fmt"
	"maps"
	"slices"
)

// Tier is one usage plan of a policy (Policy.Tiers): the limit, and for
// a GCRA policy the burst, that a request naming it is judged by in place
// of the policy's own. The policy's own limit and burst are the default
// tier: a request that names no tier, or one the policy does not list, is
// judged by them.
//
// Counts are per key, not per tier: a key that moves to another tier in
// the middle of a window keeps its count, and is judged by the new tier's
// limit from its next request (a GCRA bucket is rescaled to the new rate,
// as an override rescales it). A key's override wins over its tier: it
// replaces the tier's limit, and its burst when it sets one. The stores
// apply both inside the decision's transaction, so every process applies
// one limit to one decision.
type Tier struct {
	Limit int64
	// Burst is, for GCRA, how many requests may pass at once under the
	// tier; zero means the tier's Limit (not the policy's burst). Other
	// algorithms take none.
	Burst int64
}

// maxTiers bounds a policy's tiers: each is validated with the policy,
// and each name is a metric dimension value.
const maxTiers = 16

// maxTierNameBytes bounds a tier's name, which headers, bodies, logs and
// metrics repeat.
const maxTierNameBytes = 64

// reservedTier is the name that responses, logs and metrics give the
// policy's own limit: no tier may take it.
const reservedTier = "default"

// tiered is p as its tier named name sets it: the tier's limit and burst
// in place of p's, or p itself when p lists no tier so named.
func (p Policy) tiered(name string) Policy {
	if t, ok := p.Tiers[name]; ok {
		p.Limit, p.Burst = t.Limit, t.Burst
	}
	return p
}

// tierNames are p's tier names, sorted, for messages that do not depend
// on a map's order.
func (p Policy) tierNames() []string {
	if len(p.Tiers) == 0 {
		return nil // the policies without tiers, validated on every decision: maps.Keys allocates
	}
	return slices.Sorted(maps.Keys(p.Tiers))
}

// tierErrors are what is wrong with p's tiers: more than maxTiers; a name
// that a policy could not have, or "default"; a limit or burst that the
// policy could not have (each tier's limit and burst are validated as the
// policy's would be).
func (p Policy) tierErrors() []error {
	var errs []error
	if len(p.Tiers) > maxTiers {
		errs = append(errs, fmt.Errorf("policy %q: %d tiers, more than %d", p.Name, len(p.Tiers), maxTiers))
	}
	for _, name := range p.tierNames() {
		switch {
		case name == "" || len(name) > maxTierNameBytes || !validName(name):
			errs = append(errs, fmt.Errorf("policy %q: tier %q: tier names are 1 to %d lower-case letters, digits, '-', '_' and '.'", p.Name, name, maxTierNameBytes))
		case name == reservedTier:
			errs = append(errs, fmt.Errorf("policy %q: tier %q: the name is reserved for the policy's own limit", p.Name, name))
		}
		errs = append(errs, p.tiered(name).limitErrors(fmt.Sprintf("policy %q tier %q", p.Name, name))...)
	}
	return errs
}

// leastCapacity is the least Capacity among p's own and its tiers': the
// most one attempt may cost and pass under any of them.
func (p Policy) leastCapacity() int64 {
	least := p.Capacity()
	for name := range p.Tiers {
		least = min(least, p.tiered(name).Capacity())
	}
	return least
}
