package limiter

import (
	"errors"
	"fmt"
	"time"
)

// Override replaces a policy's limit, and for a GCRA policy its burst, for
// one key: a customer on a bigger plan, say. It wins over the key's tier
// (Tier). It is kept in the store, so
// every process sees it at its next decision, and survives pruning.
type Override struct {
	Limit int64
	// Burst replaces a GCRA policy's burst; zero keeps the policy's, or
	// the tier's in force (which, when it sets none, is the limit: the
	// override's).
	Burst int64
}

// Validate reports what is wrong with o as an override of p, or nil.
func (o Override) Validate(p Policy) error {
	switch {
	case o.Limit < 1:
		return fmt.Errorf("limit %d is below 1", o.Limit)
	case o.Burst != 0 && p.Algorithm != GCRA:
		return fmt.Errorf("burst applies to gcra policies only; %q is %s", p.Name, p.Algorithm)
	case o.Burst < 0 || o.Burst > maxBurst:
		return fmt.Errorf("burst %d is not from 1 to %d", o.Burst, maxBurst)
	}
	if err := p.overridden(&o).Validate(); err != nil {
		return err
	}
	// An override wins over a tier, and keeps the tier's burst when it
	// sets none: it must make a valid policy under every tier too.
	for _, name := range p.tierNames() {
		q := p.tiered(name).overridden(&o)
		if errs := q.limitErrors(fmt.Sprintf("policy %q under tier %q", p.Name, name)); len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	return nil
}

// With is p as o changes it; p itself when o is nil. The burst is a GCRA
// policy's only: an override set while the policy was GCRA keeps its burst
// in the store after the policy changes algorithm, and a window policy
// given it would take it for its capacity (refusing, as impossible, costs
// its limit lets through).
//
// An override is validated against the policy as it is when it is set,
// and stays when the policy changes. Where a GCRA policy's window has
// changed since so that the override would pass GCRA's bounds (a request
// more often than every microsecond, a bucket of more than a billion or
// that takes more than a century to drain), With applies it as far as
// those bounds allow: the fastest rate, the largest bucket, rather than an
// interval that rounds to nothing or a tolerance past an int64 of
// nanoseconds, which would deny a fresh key for centuries or divide by
// zero.
func (p Policy) With(o *Override) Policy {
	return p.overridden(o).withinGCRABounds()
}

// overridden is p with o's limit and burst, unbounded: what Validate
// checks, so that an override GCRA cannot honour is refused when set.
func (p Policy) overridden(o *Override) Policy {
	if o == nil {
		return p
	}
	p.Limit = o.Limit
	if o.Burst > 0 && p.Algorithm == GCRA {
		p.Burst = o.Burst
	}
	return p
}

// withinGCRABounds is p with its rate and burst brought within what
// validateGCRA admits; p itself when they are, or p is not GCRA.
func (p Policy) withinGCRABounds() Policy {
	if p.Algorithm != GCRA || p.Limit < 1 || p.Window < time.Microsecond {
		return p
	}
	if p.Window/time.Duration(p.Limit) < time.Microsecond {
		p.Limit = int64(p.Window / time.Microsecond)
	}
	if p.Capacity() > maxBurst {
		p.Burst = maxBurst
	}
	if most := int64(maxTolerance / (p.Window / time.Duration(p.Limit))); p.Capacity() > most {
		p.Burst = most
	}
	return p
}
