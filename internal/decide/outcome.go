package decide

import (
	"context"
	"fmt"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// State is what a store read of a charge's counters inside the decision's
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

// Decision is one charge's decision, with what the store writes back.
type Decision struct {
	limiter.Decision
	// TAT is, for a GCRA policy, the key's theoretical arrival time once
	// the attempt is decided: moved on if the attempt passed, else as the
	// store read it (rescaled to the policy's rate). A store writes it
	// back when Moved, with Emission(Policy).
	TAT   time.Time
	Moved bool

	// state is what the decision was made from.
	state State
}

// State is what d was decided from.
func (d Decision) State() State { return d.state }

// Outcome is a store's decision of an attempt: one Decision per charge, in
// order.
type Outcome struct {
	Decisions []Decision
	// Allowed is true when every policy that is not a shadow allowed the
	// attempt: the request passes, and has its audit record.
	Allowed bool
	// Refused is set, counting nothing, when the key's effective policies
	// (its overrides applied, as read in the decision's transaction) could
	// never let the attempt through: an error wrapping
	// limiter.ErrInvalidCost (Impossible), which Store.Allow returns.
	Refused error
	// FromMemory marks a denial a reject cache made without the store; its
	// counts are those the store returned when it last denied the attempt.
	FromMemory bool
}

// Public is o as callers of Store.Allow see it.
func (o Outcome) Public() limiter.Outcome {
	out := limiter.Outcome{Allowed: o.Allowed, Decisions: make([]limiter.Decision, len(o.Decisions))}
	for i, d := range o.Decisions {
		out.Decisions[i] = d.Decision
	}
	return out
}

// Decide decides the attempt from each charge's state, read by the store in
// the decision's transaction. The attempt passes when every enforced
// policy allows it.
func Decide(a limiter.Attempt, states []State) Outcome {
	o := decisions(a, states)
	o.settle(a.Now)
	return o
}

// decisions decides each charge from its state, and the attempt as every
// enforced policy's decision has it, before settle.
func decisions(a limiter.Attempt, states []State) Outcome {
	o := Outcome{Decisions: make([]Decision, len(a.Charges)), Allowed: true}
	for i, c := range a.Charges {
		o.Decisions[i] = decideCharge(c, a.Now, states[i])
		if !o.Decisions[i].Allowed && !c.Policy.Shadow {
			o.Allowed = false
		}
	}
	return o
}

// decideCharge decides one charge from its state, as if it alone applied:
// c's policy is the effective one (Effective), and the decision names the
// tier c is judged under (TierOf).
func decideCharge(c limiter.Charge, now time.Time, st State) Decision {
	p, cost := c.Policy, Units(c)
	d := Decision{Decision: limiter.Decision{Cost: cost}, state: st}
	switch p.Algorithm {
	case limiter.GCRA:
		var next time.Time
		d.TAT = bucket(p, now, st)
		d.Allowed, next = gcraFits(p, now, d.TAT, cost)
		if d.Allowed {
			d.TAT, d.Moved = next, true
		}
		d.Usage = gcraStanding(p, c.Key, now, d.TAT, cost)
		if !d.Allowed {
			d.Usage = unrescaled(d.Usage, p, now, st, cost)
		}
	case limiter.Sliding:
		d.Allowed = weighted(p, now, st.Cur, st.Prev) <= float64(p.Limit)+1e-9
		d.Usage = Usage(p, c.Key, now, st)
		if !d.Allowed || d.Remaining < cost {
			d.ResetAfter = slidingWait(p, now, st.Cur, st.Prev, cost)
		}
	default:
		d.Allowed = st.Cur <= p.Limit
		d.Usage = Usage(p, c.Key, now, st)
	}
	d.Tier = TierOf(c)
	return d
}

// settle leaves a GCRA bucket where it was when the attempt did not pass:
// a denied attempt, whichever policy denied it, does not move it.
func (o *Outcome) settle(now time.Time) {
	if o.Allowed {
		return
	}
	for i, d := range o.Decisions {
		if d.Moved {
			tat := bucket(d.Policy, now, d.state)
			o.Decisions[i].TAT, o.Decisions[i].Moved = tat, false
			o.Decisions[i].Usage = unrescaled(gcraStanding(d.Policy, d.Key, now, tat, d.Cost), d.Policy, now, d.state, d.Cost)
			o.Decisions[i].Tier = d.Tier
		}
	}
}

// Impossible is an error wrapping limiter.ErrInvalidCost when an enforced
// policy of a could never let a's cost through, a's policies being the
// effective ones (overrides applied, as a store reads them in the
// decision's transaction), for the store to refuse the attempt with,
// counting nothing. A lowered override is caught here, where the
// Limiter's check before the store, reading overrides only for costs
// beyond a policy's own capacity, lets it by.
func Impossible(a limiter.Attempt) error {
	for _, c := range a.Charges {
		if most := c.Policy.Capacity(); Units(c) > most && !c.Policy.Shadow {
			return &limiter.RequestError{Kind: limiter.ErrInvalidCost, Reason: fmt.Sprintf("%d is more than policy %q can ever let through at once, %d", Units(c), c.Policy.Name, most)}
		}
	}
	return nil
}

type captureKey struct{}

// Capture returns ctx asking the store that decides an attempt with it for
// the whole of its outcome, which the store leaves in *o (Report). A reject
// cache needs the states it decided from, to decide again from memory, and
// the HTTP layer whether a denial came from memory; callers outside this
// module need neither, and see only what Store.Allow returns.
func Capture(ctx context.Context) (context.Context, *Outcome) {
	o := new(Outcome)
	return context.WithValue(ctx, captureKey{}, o), o
}

// Report gives o to whoever asked for it on ctx (Capture). Every store of
// this module calls it with each outcome it decides.
func Report(ctx context.Context, o Outcome) {
	if dst, ok := ctx.Value(captureKey{}).(*Outcome); ok {
		*dst = o
	}
}
