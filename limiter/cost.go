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

// Impossible is ValidateCosts of a's checks as they are, their policies
// the effective ones (overrides applied, as a store reads them in the
// decision's transaction): an error wrapping ErrInvalidCost when an
// enforced policy could never let a's cost through, for the store to
// refuse the attempt with, counting nothing. A lowered override is caught
// here, where ValidateCosts, reading overrides only for costs beyond a
// policy's own capacity, lets it by.
func (a Attempt) Impossible() error {
	_, err := fitting(context.Background(), nil, a.Checks)
	return err
}

// fitting is ValidateCosts, also counting the checks whose cost fits
// their policy's capacity, shadows included.
func fitting(ctx context.Context, s Store, checks []Check) (int, error) {
	fits := 0
	for _, c := range checks {
		if c.Cost < 0 || c.Cost > MaxLimit {
			return 0, fmt.Errorf("%w: %d is not from 1 to %d", ErrInvalidCost, c.Cost, int64(MaxLimit))
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
