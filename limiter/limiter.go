package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
}

// Request is one check.
type Request struct {
	// Key is the client key to count under; it must be a valid key.
	Key string
	// Cost is what the request counts as, from 1 to the largest limit (or
	// GCRA burst) among the policies checked; zero means 1.
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
// ErrInvalidKey, ErrUnknownPolicy or ErrInvalidCost, wrapped with what is
// wrong; or the store's error, reading overrides. A cost beyond every
// checked policy's limit is refused, unless an override gives the key a
// limit it fits: only then are the key's overrides read.
func (l *Limiter) Attempt(ctx context.Context, now time.Time, r Request) (Attempt, error) {
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
				return Attempt{}, fmt.Errorf("%w: %q is named twice", ErrUnknownPolicy, name)
			}
			policies[i] = l.Policies[j]
		}
	}
	if len(policies) == 0 {
		return Attempt{}, fmt.Errorf("%w: none applies", ErrUnknownPolicy)
	}
	cost, most := max(r.Cost, 1), largestLimit(policies)
	if r.Cost >= 0 && cost > most {
		raised, err := l.overridden(ctx, policies, r.Key)
		if err != nil {
			return Attempt{}, err
		}
		most = max(most, raised)
	}
	if r.Cost < 0 || cost > most {
		return Attempt{}, fmt.Errorf("%w: %d is not from 1 to %d, the largest limit checked", ErrInvalidCost, r.Cost, most)
	}
	a := Attempt{Checks: make([]Check, len(policies)), Now: now, Route: r.Route, RequestID: r.RequestID}
	for i, p := range policies {
		a.Checks[i] = Check{Policy: p, Key: r.Key, Cost: cost}
	}
	return a, nil
}

// largestLimit is the largest limit (or GCRA burst) among policies.
func largestLimit(policies []Policy) int64 {
	var most int64
	for _, p := range policies {
		most = max(most, p.Limit, p.Capacity())
	}
	return most
}

// overridden is the largest limit key's overrides give it among policies.
func (l *Limiter) overridden(ctx context.Context, policies []Policy, key string) (int64, error) {
	var most int64
	for _, p := range policies {
		o, err := l.Store.Override(ctx, p, key)
		if err != nil {
			return 0, err
		}
		if o != nil {
			most = max(most, largestLimit([]Policy{p.With(o)}))
		}
	}
	return most, nil
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}
