package limiter

import "time"

// Usage is where a key stands under a policy at one instant.
type Usage struct {
	// Policy is the policy as it applied to the key: its limit (and
	// burst) are those of the tier in force, or the key's override's, if
	// it has one.
	Policy Policy
	Key    string
	// Tier is the tier in force: the name of one of Policy's Tiers, whose
	// limit and burst Policy holds, or "" for the policy's own. A key's
	// override, if it has one, set Policy's limit over the tier's.
	Tier string
	// Count is the number of attempts counted in the window, allowed or not,
	// each as many as it cost. For a sliding policy it is the weighted
	// count, rounded up; for GCRA, the part of the bucket in use.
	Count int64
	// Remaining is how many more requests of cost 1 the policy allows now:
	// Limit - Count, never below zero; for GCRA, Capacity() - Count, what
	// is left of the burst.
	Remaining int64
	// WindowStart and Reset are the start and end of the current fixed
	// window: the one the store counts in.
	WindowStart time.Time
	Reset       time.Time
	// ResetAfter is when to come back, rounded up to whole seconds and at
	// least one: for a fixed window, until it ends; for a sliding one,
	// until a request would be allowed again when none remain (or when the
	// attempt was denied), else until the window ends; for GCRA, until the
	// bucket is whole again, or when too little is left, until a request
	// fits. It is the Retry-After of a denial.
	ResetAfter time.Duration
}

// Decision is the outcome of one attempt under one policy. Being denied is a
// Decision with Allowed false, not an error. For a shadow policy, Allowed is
// what the policy would have decided; it rejects nothing.
type Decision struct {
	Usage
	Allowed bool
	// Cost is the attempt's cost under the policy: how many requests it
	// counts as.
	Cost int64
}

// Outcome is what a store decided for an attempt: one Decision per charge,
// in order.
type Outcome struct {
	Decisions []Decision
	// Allowed is true when every policy that is not a shadow allowed the
	// attempt: the request passes, and has its audit record.
	Allowed bool
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
// client and its next attempt of the same cost: those that rejected this
// one, and the enforced ones that allowed it with less left than it costs,
// which would reject the next.
func (o Outcome) HoldingBack() []Decision {
	var out []Decision
	for _, d := range o.Decisions {
		if !d.Policy.Shadow && (!d.Allowed || d.Remaining < d.Cost) {
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
