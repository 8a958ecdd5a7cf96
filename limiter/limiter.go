package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Limiter decides, for a Go caller, whether a key may proceed under named
// policies at a cost: what POST /check decides for a service in any
// language, without HTTP. The limited party is the caller's client, so a
// denial is an Outcome with Allowed false, not an error.
//
// A Limiter is safe for simultaneous use by multiple goroutines.
type Limiter struct {
	Store Store
	// Policies are the policies a check may name; a check that names none
	// is decided under all of them.
	Policies []Policy
	// Now reads the clock, once per check. Defaults to time.Now.
	Now func() time.Time

	// Policies are validated at the first check (ValidatePolicies); they
	// must not change after it.
	validated sync.Once
	invalid   error
}

// ErrInvalidPolicies is a Limiter whose Policies ValidatePolicies refuses,
// or that has no Store: every check fails with it.
var ErrInvalidPolicies = errors.New("invalid policies")

// Request is one check.
type Request struct {
	// Key is the client key to count under; it must be a valid key.
	Key string
	// Cost is what the request counts as, zero meaning 1; see
	// ValidateCosts for what it may be.
	Cost int64
	// Policies name the policies to check, each at most once; none means
	// every policy of the Limiter.
	Policies []string
	// Route and RequestID go into the audit record of an allowed check.
	Route, RequestID string
}

// Errors a check is refused with, before anything is counted.
var (
	ErrUnknownPolicy = errors.New("no such policy")
	ErrPolicyTwice   = errors.New("a policy is named twice")
	ErrInvalidCost   = errors.New("invalid cost")
)

// Check counts cost under each named policy (every policy when none is
// named) for key, in one store transaction, and decides: the attempt
// passes when every enforced policy allows it. Costs are counted whether it
// passes or not, as every attempt counts in the windows.
func (l *Limiter) Check(ctx context.Context, key string, cost int64, policies ...string) (Outcome, error) {
	a, err := l.Attempt(ctx, l.now(), Request{Key: key, Cost: cost, Policies: policies, Route: "check"})
	if err != nil {
		return Outcome{}, err
	}
	return l.Store.Allow(ctx, a)
}

// Attempt is the attempt r asks for at now, or why it cannot be made:
// ErrInvalidPolicies, ErrInvalidKey, ErrUnknownPolicy, ErrPolicyTwice or
// ErrInvalidCost, wrapped with what is
// wrong; or the store's error, reading overrides (ValidateCosts).
func (l *Limiter) Attempt(ctx context.Context, now time.Time, r Request) (Attempt, error) {
	l.validated.Do(func() {
		err := ValidatePolicies(l.Policies)
		if l.Store == nil {
			err = errors.Join(err, errors.New("no store"))
		}
		if err != nil {
			l.invalid = fmt.Errorf("%w: %w", ErrInvalidPolicies, err)
		}
	})
	if l.invalid != nil {
		return Attempt{}, l.invalid
	}
	if err := ValidKey(r.Key); err != nil {
		return Attempt{}, err
	}
	policies := l.Policies
	if len(r.Policies) > 0 {
		policies = make([]Policy, len(r.Policies))
		for i, name := range r.Policies {
			j := slices.IndexFunc(l.Policies, func(p Policy) bool { return p.Name == name })
			switch {
			case j < 0:
				return Attempt{}, fmt.Errorf("%w: %q", ErrUnknownPolicy, name)
			case slices.Contains(r.Policies[:i], name):
				return Attempt{}, fmt.Errorf("%w: %q", ErrPolicyTwice, name)
			}
			policies[i] = l.Policies[j]
		}
	}
	if len(policies) == 0 {
		return Attempt{}, fmt.Errorf("%w: none applies", ErrUnknownPolicy)
	}
	if r.Cost < 0 {
		return Attempt{}, fmt.Errorf("%w: %d is below 1", ErrInvalidCost, r.Cost)
	}
	a := Attempt{Checks: make([]Check, len(policies)), Now: now, Route: r.Route, RequestID: r.RequestID}
	for i, p := range policies {
		a.Checks[i] = Check{Policy: p, Key: r.Key, Cost: r.Cost}
	}
	// The check contract's bound, the largest limit checked, matters
	// with shadows only: an enforced policy's is tighter (ValidateCosts).
	switch fits, err := fitting(ctx, l.Store, a.Checks); {
	case err != nil:
		return Attempt{}, err
	case fits == 0:
		return Attempt{}, fmt.Errorf("%w: %d is more than the largest limit checked", ErrInvalidCost, max(r.Cost, 1))
	}
	return a, nil
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}
