package limiter

import "time"

// Decision is the outcome of one attempt under one policy. Being denied is a
// Decision with Allowed false, not an error. For a shadow policy, Allowed is
// what the policy would have decided; it rejects nothing.
type Decision struct {
	Usage
	Allowed bool
	// FromMemory marks a denial a RejectCache made without the store; its
	// counts are those the store returned when it last denied the attempt.
	FromMemory bool

	// cur and prev are the raw counts the decision was made from.
	cur, prev int64
}

// Decide turns the count returned by a store's increment into a Decision:
// the attempt is allowed while the count, including it, is within the limit.
// prev is the previous window's count, used by sliding policies only.
func (p Policy) Decide(key string, now time.Time, cur, prev int64) Decision {
	allowed := cur <= p.Limit
	if p.IsSliding() {
		allowed = p.weighted(now, cur, prev) <= float64(p.Limit)+1e-9
	}
	d := Decision{Usage: p.UsageAt(key, now, cur, prev), Allowed: allowed, cur: cur, prev: prev}
	if !allowed && p.IsSliding() {
		d.ResetAfter = p.slidingWait(now, cur, prev)
	}
	return d
}

// Outcome is what a store decided for an attempt: one Decision per check,
// in order.
type Outcome struct {
	Decisions []Decision
	// Allowed is true when every policy that is not a shadow allowed the
	// attempt: the request passes, and has its audit record.
	Allowed bool
}

// Outcome computes the attempt's outcome from each check's current and, for
// sliding policies, previous window counts, this attempt included.
func (a Attempt) Outcome(cur, prev []int64) Outcome {
	o := Outcome{Decisions: make([]Decision, len(a.Checks)), Allowed: true}
	for i, c := range a.Checks {
		o.Decisions[i] = c.Policy.Decide(c.Key, a.Now, cur[i], prev[i])
		if !o.Decisions[i].Allowed && !c.Policy.Shadow {
			o.Allowed = false
		}
	}
	return o
}

// Denied are the decisions of the policies that rejected the attempt:
// those that are not shadows and did not allow it.
func (o Outcome) Denied() []Decision {
	var out []Decision
	for _, d := range o.Decisions {
		if !d.Allowed && !d.Policy.Shadow {
			out = append(out, d)
		}
	}
	return out
}

// HoldingBack are the decisions of the policies that stand between the
// client and its next attempt: those that rejected this one, and the
// enforced ones that allowed it with nothing left, which would reject the
// next.
func (o Outcome) HoldingBack() []Decision {
	var out []Decision
	for _, d := range o.Decisions {
		if !d.Policy.Shadow && (!d.Allowed || d.Remaining == 0) {
			out = append(out, d)
		}
	}
	return out
}

// RetryAfter is how long a rejected client should wait for its next
// attempt to pass every policy: the longest ResetAfter among HoldingBack.
// Waiting only for the policies that rejected would send the client back
// into another 429.
func (o Outcome) RetryAfter() time.Duration {
	var longest time.Duration
	for _, d := range o.HoldingBack() {
		longest = max(longest, d.ResetAfter)
	}
	return longest
}
