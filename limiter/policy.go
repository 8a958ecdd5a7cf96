package limiter

import (
	"errors"
	"fmt"
	"time"
)

// Policy is one rate limit: at most Limit attempts per key in each fixed
// window of length Window.
type Policy struct {
	// Name identifies the policy in response headers (RateLimit-Policy).
	Name string
	// Limit is the number of requests allowed per key and window.
	Limit int64
	// Window is the window length, a whole number of seconds.
	Window time.Duration
	// Namespace keeps this policy's counters apart from other policies' in a
	// shared store. Empty means the stored key is the client key exactly, as
	// the design note's layout has it; at most one policy per store may leave
	// it empty. Otherwise the stored key is Namespace, a unit separator
	// (U+001F), and the client key: ValidKey rejects control characters, so no
	// client key can collide with a namespaced one.
	Namespace string
}

// MaxWindow is the longest window a policy may have.
const MaxWindow = 30 * 24 * time.Hour

// Validate reports what is wrong with p, or nil.
func (p Policy) Validate() error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("policy name is empty"))
	}
	if p.Limit < 1 {
		errs = append(errs, fmt.Errorf("policy %q: limit %d is below 1", p.Name, p.Limit))
	}
	if p.Window < time.Second || p.Window > MaxWindow || p.Window%time.Second != 0 {
		errs = append(errs, fmt.Errorf("policy %q: window %v is not a whole number of seconds between 1s and %v", p.Name, p.Window, MaxWindow))
	}
	return errors.Join(errs...)
}

// StoreKey returns the key under which the store keeps key's counters for p.
func (p Policy) StoreKey(key string) string {
	if p.Namespace == "" {
		return key
	}
	return p.Namespace + "\x1f" + key
}

// WindowSeconds is the window length in whole seconds.
func (p Policy) WindowSeconds() int64 { return int64(p.Window / time.Second) }

// Usage is where a key stands in its current window at one instant.
type Usage struct {
	Policy Policy
	Key    string
	// Count is the number of attempts counted in the window, allowed or not.
	Count int64
	// Remaining is how many more requests the window allows: Limit - Count,
	// never below zero.
	Remaining int64
	// WindowStart and Reset are the start and end of the window.
	WindowStart time.Time
	Reset       time.Time
	// ResetAfter is the time until Reset, rounded up to whole seconds, so it
	// is always between one second and the window length.
	ResetAfter time.Duration
}

// Decision is the outcome of one attempt. Being denied is a Decision with
// Allowed false, not an error.
type Decision struct {
	Usage
	Allowed bool
	// FromMemory marks a denial a RejectCache made without the store; its
	// Count is the count the store returned when it last denied the key.
	FromMemory bool
}

// RetryAfter is how long a denied client should wait: until the window ends.
func (d Decision) RetryAfter() time.Duration { return d.ResetAfter }

// UsageAt computes where key stands at now under p, given the window's count.
func (p Policy) UsageAt(key string, now time.Time, count int64) Usage {
	start := WindowStart(now, p.Window)
	reset := start.Add(p.Window)
	after := time.Duration(ceilSeconds(reset.Sub(now))) * time.Second
	// now lies in [start, reset), so after is in [1s, Window]; the clamps only
	// guard against a caller passing an instant from a different window.
	after = min(max(after, time.Second), p.Window)
	return Usage{
		Policy:      p,
		Key:         key,
		Count:       count,
		Remaining:   max(p.Limit-count, 0),
		WindowStart: start,
		Reset:       reset,
		ResetAfter:  after,
	}
}

// Decide turns the count returned by a store's increment into a Decision:
// the attempt is allowed while the count, including it, is within the limit.
func (p Policy) Decide(key string, now time.Time, count int64) Decision {
	return Decision{Usage: p.UsageAt(key, now, count), Allowed: count <= p.Limit}
}
