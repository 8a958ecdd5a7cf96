package limiter

import "time"

// Decision is the outcome of one attempt under one policy. Being denied is a
// Decision with Allowed false, not an error. For a shadow policy, Allowed is
// what the policy would have decided; it rejects nothing.
type Decision struct {
	Usage
	Allowed bool
	// Cost is the attempt's cost under the policy: how many requests it
	// counts as.
	Cost int64
	// FromMemory marks a denial a RejectCache made without the store; its
	// counts are those the store returned when it last denied the attempt.
	FromMemory bool
	// TAT is, for a GCRA policy, the key's theoretical arrival time once
	// the attempt is decided: moved on if the attempt passed, else as the
	// store read it (rescaled to the policy's rate). A store writes it back
	// when Moved, with Policy.Emission().
	TAT   time.Time
	Moved bool

	// state is what the decision was made from.
	state State
}

// State is what a store read of a check's counters inside the decision's
// write transaction.
type State struct {
	// Cur is the count of the window containing the attempt, the attempt's
	// cost included; Prev the previous window's (sliding policies only).
	Cur, Prev int64
	// TAT is a GCRA policy's theoretical arrival time before the attempt;
	// zero for a key never seen. Emission is the interval it was written
	// with (zero if unknown: taken as the policy's), so that a change of
	// the key's rate rescales what the bucket holds back.
	TAT      time.Time
	Emission time.Duration
}

// decide decides one check from its state, as if it alone applied.
func (c Check) decide(now time.Time, st State) Decision {
	p, cost := c.Policy, c.Units()
	d := Decision{Cost: cost, state: st}
	switch {
	case p.IsGCRA():
		var next time.Time
		d.TAT = p.bucket(now, st)
		d.Allowed, next = p.gcraFits(now, d.TAT, cost)
		if d.Allowed {
			d.TAT, d.Moved = next, true
		}
		d.Usage = p.gcraStanding(c.Key, now, d.TAT, cost)
	case p.IsSliding():
		d.Allowed = p.weighted(now, st.Cur, st.Prev) <= float64(p.Limit)+1e-9
		d.Usage = p.UsageAt(c.Key, now, st)
		if !d.Allowed || d.Remaining < cost {
			d.ResetAfter = p.slidingWait(now, st.Cur, st.Prev, cost)
		}
	default:
		d.Allowed = st.Cur <= p.Limit
		d.Usage = p.UsageAt(c.Key, now, st)
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
	// Refused is what a store sets, counting nothing, when the key's
	// effective policies (its overrides applied, as read in the decision's
	// transaction) could never let the attempt through: an error wrapping
	// ErrInvalidCost (Attempt.Impossible). Store.Allow returns it as its
	// error; an Outcome with Refused set never leaves a store.
	Refused error
}

// Outcome decides the attempt from each check's state, read by the store in
// the decision's transaction. The attempt passes when every enforced
// policy allows it.
func (a Attempt) Outcome(states []State) Outcome {
	o := a.decisions(states)
	o.settle(a.Now)
	return o
}

// Decided is the outcome of an attempt that a store decided itself, by
// conditions on its writes (DynamoDB): allowed says whether they held, and
// the decisions are computed from the states read around the writes. When
// allowed, every enforced policy allowed the attempt, whatever counts that
// raced in since say, and its GCRA buckets moved.
func (a Attempt) Decided(states []State, allowed bool) Outcome {
	o := a.decisions(states)
	o.Allowed = allowed
	for i, c := range a.Checks {
		if allowed && !c.Policy.Shadow {
			o.Decisions[i].Allowed = true
		}
	}
	o.settle(a.Now)
	return o
}

// decisions decides each check from its state, and the attempt as every
// enforced policy's decision has it, before settle.
func (a Attempt) decisions(states []State) Outcome {
	o := Outcome{Decisions: make([]Decision, len(a.Checks)), Allowed: true}
	for i, c := range a.Checks {
		o.Decisions[i] = c.decide(a.Now, states[i])
		if !o.Decisions[i].Allowed && !c.Policy.Shadow {
			o.Allowed = false
		}
	}
	return o
}

// settle leaves a GCRA bucket where it was when the attempt did not pass:
// a denied attempt, whichever policy denied it, does not move it.
func (o *Outcome) settle(now time.Time) {
	if o.Allowed {
		return
	}
	for i, d := range o.Decisions {
		if d.Moved {
			tat := d.Policy.bucket(now, d.state)
			o.Decisions[i].TAT, o.Decisions[i].Moved = tat, false
			o.Decisions[i].Usage = d.Policy.gcraStanding(d.Key, now, tat, d.Cost)
		}
	}
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
