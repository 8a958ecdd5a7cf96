package limiter

import (
	"context"
	"fmt"
)

// ValidateCosts refuses, with ErrInvalidCost, an attempt that could never
// pass: one whose cost under an enforced policy is more than the policy's
// Capacity, its limit (a GCRA policy's burst). Counting it would charge
// the other policies for nothing, and its Retry-After would send the
// client back to be denied again; x/time/rate refuses a reservation beyond
// its burst for the same reason. Shadow policies never deny, and bound
// nothing. A key's override may raise the capacity: the key's overrides
// are read, from s, only for a cost beyond a policy's own.
func ValidateCosts(ctx context.Context, s Store, checks []Check) error {
	_, err := fitting(ctx, s, checks)
	return err
}

// fitting is ValidateCosts, also counting the checks whose cost fits
// their policy's capacity, shadows included.
func fitting(ctx context.Context, s Store, checks []Check) (int, error) {
	fits := 0
	for _, c := range checks {
		if c.Cost < 0 {
			return 0, fmt.Errorf("%w: %d is below 1", ErrInvalidCost, c.Cost)
		}
		most, err := capacityFor(ctx, s, c)
		switch {
		case err != nil:
			return 0, err
		case c.Units() <= most:
			fits++
		case !c.Policy.Shadow:
			return 0, fmt.Errorf("%w: %d is more than policy %q can ever let through at once, %d", ErrInvalidCost, c.Units(), c.Policy.Name, most)
		}
	}
	return fits, nil
}

// capacityFor is c's policy's capacity for c's key: the policy's own, or,
// when c's cost is beyond it, the key's override's, if it has one.
func capacityFor(ctx context.Context, s Store, c Check) (int64, error) {
	most := c.Policy.Capacity()
	if c.Units() <= most || s == nil {
		return most, nil
	}
	o, err := s.Override(ctx, c.Policy, c.Key)
	if err != nil {
		return 0, err
	}
	return c.Policy.With(o).Capacity(), nil
}
