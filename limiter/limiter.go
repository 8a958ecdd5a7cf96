package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ft251/ratelimit/internal/namespaces"
	"github.com/ft251/ratelimit/internal/typednil"
)

// Limiter decides, for a Go caller, whether a key may proceed under named
// policies at a cost: what POST /check decides for a service in any
// language, without HTTP. The limited party is the caller's client, so a
// denial is an Outcome with Allowed false, not an error.
//
// A Limiter is safe for simultaneous use by multiple goroutines. Its
// Store and Policies are checked at its first check, and must not change
// after it: a Limiter refused then (no store, an invalid policy) stays
// refused; make a new one.
type Limiter struct {
	Store Store
	// Policies are the policies a check may name; a check that names none
	// is decided under all of them.
	Policies []Policy
	// Now reads the clock, once per check. Defaults to time.Now.
	Now func() time.Time

	// Policies are validated at the first check (validatePolicies); they
	// must not change after it.
	validated sync.Once
	invalid   error
}

// Request is one check.
type Request struct {
	// Key is the client key to count under; it must be a valid key.
	Key string
	// Cost is what the request counts as, zero meaning 1. A cost more than
	// an enforced policy can ever let through at once (its Capacity, or
	// its override's) is refused with ErrInvalidCost, counting nothing.
	Cost int64
	// Policies name the policies to check, each at most once; none means
	// every policy of the Limiter.
	Policies []string
	// At is the instant of the request; zero means now, by Limiter.Now.
	// The stores decide at instants from 1970 to 2160 only, and fail
	// with an error for any other (a clock that is wrong).
	At time.Time
	// Route and RequestID go into the audit record of an allowed check.
	Route, RequestID string
	// Tier is the tier the check names, for each policy that lists it;
	// the others, and a check that names none, get the policy's own
	// limit (see Tier).
	Tier string
}

// Allow counts r's cost under each policy it names (every policy when it
// names none) for its key, in one store transaction, and decides: the
// attempt passes when every enforced policy allows it. Costs are counted
// whether it passes or not, as every attempt counts in the windows.
//
// A request that cannot be made fails before anything is counted, with
// ErrInvalidPolicies, ErrInvalidKey, ErrUnknownPolicy, ErrPolicyTwice or
// ErrInvalidCost, wrapped with what is wrong; a store that fails, with its
// error (ErrUnavailable for one that may clear by itself).
func (l *Limiter) Allow(ctx context.Context, r Request) (Outcome, error) {
	if r.Route == "" {
		r.Route = "check"
	}
	if r.At.IsZero() {
		r.At = l.now()
	}
	a, err := l.attempt(ctx, r)
	if err != nil {
		return Outcome{}, err
	}
	return l.Store.Allow(ctx, a)
}

// attempt is the attempt r asks for, or why it cannot be made.
func (l *Limiter) attempt(ctx context.Context, r Request) (Attempt, error) {
	l.validated.Do(func() {
		err := validatePolicies(l.Policies)
		if len(l.Policies) == 0 {
			err = errors.Join(err, errors.New("no policies: nothing would be counted"))
		}
		err = errors.Join(err, typednil.Missing("store", l.Store))
		if err == nil {
			uses := make([]namespaces.Use, len(l.Policies))
			for i, p := range l.Policies {
				uses[i] = namespaces.Use{Namespace: p.Namespace, Name: p.Name}
			}
			err = namespaces.Claim(l.Store, uses...)
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
				return Attempt{}, refuse(ErrUnknownPolicy, "%q", name)
			case slices.Contains(r.Policies[:i], name):
				return Attempt{}, refuse(ErrPolicyTwice, "%q", name)
			}
			policies[i] = l.Policies[j]
		}
	}
	if r.Cost < 0 {
		return Attempt{}, refuse(ErrInvalidCost, "%d is below 1", r.Cost)
	}
	a := Attempt{Charges: make([]Charge, len(policies)), Now: r.At, Route: r.Route, RequestID: r.RequestID}
	for i, p := range policies {
		a.Charges[i] = Charge{Policy: p, Key: r.Key, Cost: r.Cost, Tier: r.Tier}
	}
	// The check contract's bound, the largest limit checked, matters
	// with shadows only: an enforced policy's is tighter (withinCapacity).
	switch fits, err := withinCapacity(ctx, l.Store, a.Charges); {
	case err != nil:
		return Attempt{}, err
	case fits == 0:
		return Attempt{}, refuse(ErrInvalidCost, "%d is more than the largest limit checked", max(r.Cost, 1))
	}
	return a, nil
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}
