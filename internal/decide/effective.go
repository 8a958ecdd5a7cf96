package decide

import (
	"errors"
	"fmt"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// Validate reports what is wrong with a, or nil: no charges at all; a
// policy that is not valid, a key that is no client key (limiter.ValidKey)
// or a cost out of range; an instant Instant refuses. Every store checks
// an attempt with it before reading anything. Charges on one counter (a
// policy twice, two on one namespace) are taken: a configuration refuses
// them (limiter.ValidateRules), a Store decides them as charges on one
// counter, each read before any is counted.
func Validate(a limiter.Attempt) error {
	if len(a.Charges) == 0 {
		return errors.New("an attempt has no charges")
	}
	for _, c := range a.Charges {
		if err := Target(c.Policy, c.Key); err != nil {
			return err
		}
		if c.Cost < 0 || c.Cost > limiter.MaxLimit {
			return &limiter.RequestError{Kind: limiter.ErrInvalidCost, Reason: fmt.Sprintf("%d is not from 1 to %d", c.Cost, int64(limiter.MaxLimit))}
		}
	}
	return Instant(a.Now)
}

// Target reports what is wrong with the policy and key a read, a reset or
// an override names, or nil: the policy (Policy.Validate), then the key
// (limiter.ValidKey), which a store would otherwise keep as it came.
func Target(p limiter.Policy, key string) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return limiter.ValidKey(key)
}

// TargetAt is Target, then Instant: a read's or a reset's checks.
func TargetAt(p limiter.Policy, key string, now time.Time) error {
	if err := Target(p, key); err != nil {
		return err
	}
	return Instant(now)
}

// earliest and latest bound the instants the stores take: a GCRA
// bucket's time is kept as nanoseconds since 1970 in an int64, which holds
// no instant before 1970 or after April 2262, and its TAT may run up to a
// century ahead of now (a policy's tolerance is at most that). Outside
// them the arithmetic would overflow and decide wrongly without a word.
var (
	earliest = time.Unix(0, 0)
	latest   = time.Date(2160, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ErrInstant is Instant's error: the caller's clock is wrong, which no
// request and no store could mend (the service answers it 500, never with
// its fail mode).
var ErrInstant = errors.New("an instant no store decides at")

// Instant reports what is wrong with now as the instant of a decision, a
// read or a reset, or nil: the zero time.Time (a clock left unset), and
// anything outside earliest and latest.
func Instant(now time.Time) error {
	if now.Before(earliest) || !now.Before(latest) {
		return fmt.Errorf("%w: %v is not from 1970 to 2160 (a clock left unset reads the year 1)", ErrInstant, now)
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
