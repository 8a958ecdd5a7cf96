package limiter

import (
	"math"
	"time"
)

// Usage is where a key stands under a policy at one instant.
type Usage struct {
	Policy Policy
	Key    string
	// Count is the number of attempts counted in the window, allowed or not.
	// For a sliding policy it is the weighted count, rounded up.
	Count int64
	// Remaining is how many more requests the policy allows now: Limit -
	// Count, never below zero.
	Remaining int64
	// WindowStart and Reset are the start and end of the current fixed
	// window: the one the store counts in.
	WindowStart time.Time
	Reset       time.Time
	// ResetAfter is when to come back, rounded up to whole seconds: for a
	// fixed window, until it ends, so between one second and the window;
	// for a sliding one, until a request would be allowed again when none
	// remain, else until the window ends.
	ResetAfter time.Duration
}

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

// RetryAfter is how long a denied client should wait.
func (d Decision) RetryAfter() time.Duration { return d.ResetAfter }

// UsageAt computes where key stands at now under p, given the count of the
// window containing now (cur) and, for a sliding policy, of the window
// before it (prev).
func (p Policy) UsageAt(key string, now time.Time, cur, prev int64) Usage {
	start := WindowStart(now, p.Window)
	reset := start.Add(p.Window)
	toEnd := p.clamp(reset.Sub(now))
	u := Usage{Policy: p, Key: key, WindowStart: start, Reset: reset, ResetAfter: toEnd}
	if !p.IsSliding() {
		u.Count = cur
		u.Remaining = max(p.Limit-cur, 0)
		return u
	}
	u.Count = int64(math.Ceil(p.weighted(now, cur, prev) - 1e-9))
	u.Remaining = max(p.Limit-u.Count, 0)
	if u.Remaining == 0 {
		u.ResetAfter = p.slidingWait(now, cur, prev)
	}
	return u
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

// weighted is the sliding-window count at now.
func (p Policy) weighted(now time.Time, cur, prev int64) float64 {
	elapsed := now.Sub(WindowStart(now, p.Window))
	return float64(prev)*(1-float64(elapsed)/float64(p.Window)) + float64(cur)
}

// slidingWait is how long until one more attempt would be allowed, if no
// other came: later in this window, as the previous window's weight fades,
// or in the next, as this window's does.
func (p Policy) slidingWait(now time.Time, cur, prev int64) time.Duration {
	w := float64(p.Window)
	start := WindowStart(now, p.Window)
	elapsed := float64(now.Sub(start))
	room := float64(p.Limit - 1) // what the others may weigh for one more to fit
	var at float64               // nanoseconds from start
	switch {
	case float64(cur) <= room && prev > 0:
		// prev*(1 - t/w) + cur <= room, within this window.
		at = w * (1 - (room-float64(cur))/float64(prev))
	case float64(cur) <= room:
		at = elapsed
	default:
		// In the next window: cur*(1 - t/w) <= room.
		at = w
		if cur > 0 {
			at += w * max(1-room/float64(cur), 0)
		}
	}
	return p.clamp(time.Duration(at - elapsed))
}

// clamp rounds d up to whole seconds, at least one.
func (p Policy) clamp(d time.Duration) time.Duration {
	return max(time.Duration(ceilSeconds(d))*time.Second, time.Second)
}
