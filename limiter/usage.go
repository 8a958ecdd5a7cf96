package limiter

import (
	"math"
	"time"
)

// Usage is where a key stands under a policy at one instant.
type Usage struct {
	Policy Policy
	Key    string
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

// UsageAt computes where key stands at now under p, given what the store
// read: the count of the window containing now and, for a sliding policy,
// of the window before it, or a GCRA policy's TAT.
func (p Policy) UsageAt(key string, now time.Time, st State) Usage {
	if p.IsGCRA() {
		return p.gcraUsage(key, now, p.bucket(now, st))
	}
	cur, prev := st.Cur, st.Prev
	start := WindowStart(now, p.Window)
	reset := start.Add(p.Window)
	u := Usage{Policy: p, Key: key, WindowStart: start, Reset: reset, ResetAfter: wholeSeconds(reset.Sub(now))}
	if !p.IsSliding() {
		u.Count = cur
		u.Remaining = max(p.Limit-cur, 0)
		return u
	}
	u.Count = int64(math.Ceil(p.weighted(now, cur, prev) - 1e-9))
	u.Remaining = max(p.Limit-u.Count, 0)
	if u.Remaining == 0 {
		u.ResetAfter = p.slidingWait(now, cur, prev, 1)
	}
	return u
}

// wholeSeconds rounds d up to whole seconds, at least one: a wait of "0"
// would invite an immediate retry.
func wholeSeconds(d time.Duration) time.Duration {
	return max(time.Duration(math.Ceil(d.Seconds()))*time.Second, time.Second)
}
