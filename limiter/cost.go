package limiter

import (
	"context"
)

// withinCapacity refuses, with ErrInvalidCost, an attempt that could never
// pass: one whose cost under an enforced policy is more than the policy's
// Capacity, its limit (a GCRA policy's burst). Counting it would charge
// the other policies for nothing, and its Retry-After would send the
// client back to be denied again; x/time/rate refuses a reservation beyond
// its burst for the same reason. Shadow policies never deny, and bound
// nothing. A key's override may raise the capacity: the key's overrides
// are read, from s, only for a cost beyond a policy's own. It also counts
// the charges whose cost fits their policy's capacity, shadows included.
// (The stores apply the same rule in the decision's transaction, with the
// overrides they read there.)
func withinCapacity(ctx context.Context, s Store, charges []Charge) (int, error) {
	fits := 0
	for _, c := range charges {
		if c.Cost < 0 || c.Cost > MaxLimit {
			return 0, refuse(ErrInvalidCost, "%d is not from 1 to %d", c.Cost, int64(MaxLimit))
		}
		most, err := capacityFor(ctx, s, c)
		switch {
		case err != nil:
			return 0, err
		case c.units() <= most:
			fits++
		case !c.Policy.Shadow:
			return 0, refuse(ErrInvalidCost, "%d is more than policy %q can ever let through at once, %d", c.units(), c.Policy.Name, most)
		}
	}
	return fits, nil
}

// capacityFor is c's policy's capacity for c's key: the policy's own (its
// tier's, if c names one of its tiers), or, when c's cost is beyond it,
// the key's override's, if it has one.
func capacityFor(ctx context.Context, s Store, c Charge) (int64, error) {
	p := c.Policy.tiered(c.Tier)
	most := p.Capacity()
	if c.units() <= most || s == nil {
		return most, nil
	}
	o, err := s.Override(ctx, c.Policy, c.Key)
	if err != nil {
		return 0, err
	}
	return p.With(o).Capacity(), nil
}
