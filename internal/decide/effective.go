package decide

import (
	"errors"
	"fmt"

	"github.com/ft251/ratelimit/limiter"
)

// Validate reports what is wrong with a's charges, or nil: none at all, a
// policy that is not valid, a cost out of range. Every store checks an
// attempt with it before reading anything.
func Validate(a limiter.Attempt) error {
	if len(a.Charges) == 0 {
		return errors.New("an attempt has no charges")
	}
	for _, c := range a.Charges {
		if err := c.Policy.Validate(); err != nil {
			return err
		}
		if c.Cost < 0 || c.Cost > limiter.MaxLimit {
			return &limiter.RequestError{Kind: limiter.ErrInvalidCost, Reason: fmt.Sprintf("%d is not from 1 to %d", c.Cost, int64(limiter.MaxLimit))}
		}
	}
	return nil
}

// Effective is the policy c is decided under, o being its key's override
// as the store read it in the decision's transaction (nil for none): c's
// policy with the limit and burst of the tier c names, when the policy
// lists it, and then the override, which wins over the tier (its burst,
// when it sets none, is the tier's). It keeps the policy's Tiers, so that
// what is told of the decision can still name them.
func Effective(c limiter.Charge, o *limiter.Override) limiter.Policy {
	return Tiered(c.Policy, c.Tier).With(o)
}

// Tiered is p under its tier named tier: the tier's limit and burst in
// place of p's own; p itself when p lists no tier so named (the default
// tier). /status reads a key's standing under a tier by handing the store
// the policy Tiered gives, on which the store applies the key's override.
func Tiered(p limiter.Policy, tier string) limiter.Policy {
	if t, ok := p.Tiers[tier]; ok {
		p.Limit, p.Burst = t.Limit, t.Burst
	}
	return p
}

// TierOf is the tier c is judged under: c.Tier when c's policy lists it,
// else "" (the policy's own limit). It is one of the configured names or
// "", whatever a client sent.
func TierOf(c limiter.Charge) string {
	if _, ok := c.Policy.Tiers[c.Tier]; ok {
		return c.Tier
	}
	return ""
}
