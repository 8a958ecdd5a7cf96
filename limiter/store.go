package limiter

import (
	"context"
	"errors"
	"time"
)

// Store keeps counters and audit records. Implementations are safe for
// simultaneous use by multiple goroutines, and several processes may share
// one store: every decision is atomic in the store itself.
type Store interface {
	// Allow counts one attempt under each of its checks and decides it, in
	// one write transaction: the increments, and the audit record when the
	// attempt is allowed, commit together or not at all.
	Allow(ctx context.Context, a Attempt) (Outcome, error)
	// Usage reads key's standing under p at now. It never writes.
	Usage(ctx context.Context, p Policy, key string, now time.Time) (Usage, error)
	// Prune deletes counters whose window ended more than one window length
	// before now, for each row's own window, and audit records made before
	// auditBefore (none when auditBefore is zero).
	Prune(ctx context.Context, now, auditBefore time.Time) (Pruned, error)
	// Close releases the store.
	Close() error
}

// Check is one policy an attempt must pass, with the key it counts under.
type Check struct {
	Policy Policy
	Key    string
}

// Attempt is one request to be counted.
type Attempt struct {
	// Checks are the policies that apply, at least one. The first one's key
	// and window go into the audit record.
	Checks []Check
	// Now is the instant of the request, read once by the caller.
	Now time.Time
	// Route and RequestID go into the audit record of an allowed attempt.
	Route     string
	RequestID string
}

// One is an Attempt under a single policy.
func One(p Policy, key string, now time.Time, route, requestID string) Attempt {
	return Attempt{Checks: []Check{{p, key}}, Now: now, Route: route, RequestID: requestID}
}

// Validate reports what is wrong with a's checks, or nil.
func (a Attempt) Validate() error {
	if len(a.Checks) == 0 {
		return errors.New("an attempt has no checks")
	}
	for _, c := range a.Checks {
		if err := c.Policy.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Outcome is what a store decided for an attempt: one Decision per check,
// in order.
type Outcome struct {
	Decisions []Decision
	// Allowed is true when every policy that is not a shadow allowed the
	// attempt: the request passes, and has its audit record.
	Allowed bool
}

// Decide computes the outcome from each check's current and, for sliding
// policies, previous window counts.
func Decide(a Attempt, cur, prev []int64) Outcome {
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
// attempt to pass every policy: the longest wait among HoldingBack.
// Waiting only for the policies that rejected would send the client back
// into another 429.
func (o Outcome) RetryAfter() time.Duration {
	var longest time.Duration
	for _, d := range o.HoldingBack() {
		longest = max(longest, d.RetryAfter())
	}
	return longest
}

// AuditBefore is the audit cutoff at now for a retention: audit records made
// before it may be deleted. Zero retention keeps them forever and gives the
// zero time, which Prune reads as "keep".
func AuditBefore(now time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	return now.Add(-retention)
}

// Pruned reports what a Prune deleted.
type Pruned struct {
	Windows int64 `json:"windows_deleted"`
	Audit   int64 `json:"audit_deleted"`
}

// ErrUnavailable marks store failures that may clear by themselves: the file
// or its directory is missing or read-only, the lock was not granted in time,
// an I/O error. Callers answer them with their fail mode.
var ErrUnavailable = errors.New("store unavailable")
