package limiter

import (
	"context"
	"sync"
	"time"
)

// DefaultRejectCacheSize bounds how many denied keys a RejectCache remembers.
const DefaultRejectCacheSize = 10000

// RejectCache is a Store that answers repeat offenders from memory. Once it
// has seen a key denied in a window, it denies that key's further attempts
// in the same window itself, without a store round trip, until the window
// ends. An abusive client, the common case for a rate limiter, then costs
// the shared store about one transaction per allowed request plus one per
// execution environment and window, instead of one per attempt.
//
// The price is the design note's "count every attempt": with a RejectCache,
// a stored count is the attempts that reached the store (every allowed one,
// and in each execution environment the first denied one of a window), not
// every attempt. Allowed requests and their audit rows are unaffected.
//
// It is safe for simultaneous use by multiple goroutines. Usage, Prune and
// Close go straight to the wrapped store.
type RejectCache struct {
	Store
	max int

	mu     sync.Mutex
	denied map[rejectKey]Decision
	swept  time.Time // when a full cache last swept, to sweep once a second at most
}

type rejectKey struct {
	storeKey    string
	windowStart int64
}

var _ Store = (*RejectCache)(nil)

// NewRejectCache wraps s; it remembers at most max denied keys at a time
// (DefaultRejectCacheSize when max is not positive), and when full, lets
// new denials through to the store rather than evict live ones.
func NewRejectCache(s Store, max int) *RejectCache {
	if max <= 0 {
		max = DefaultRejectCacheSize
	}
	return &RejectCache{Store: s, max: max, denied: map[rejectKey]Decision{}}
}

// Allow denies from memory a key already denied in the window containing
// a.Now, and otherwise asks the store, remembering a denial.
func (c *RejectCache) Allow(ctx context.Context, a Attempt) (Decision, error) {
	k := rejectKey{a.Policy.StoreKey(a.Key), WindowStart(a.Now, a.Policy.Window).Unix()}
	c.mu.Lock()
	prev, ok := c.denied[k]
	c.mu.Unlock()
	if ok {
		// The stored count is at least what the store last said; the
		// headers need only Remaining (0) and the window, which are exact.
		d := a.Policy.Decide(a.Key, a.Now, prev.Count)
		d.FromMemory = true
		return d, nil
	}
	d, err := c.Store.Allow(ctx, a)
	if err != nil || d.Allowed {
		return d, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.denied) >= c.max && a.Now.Sub(c.swept) >= time.Second {
		c.sweep(a.Now)
	}
	if len(c.denied) < c.max {
		c.denied[k] = d
	}
	return d, nil
}

// sweep forgets denials whose window has ended. c.mu is held.
func (c *RejectCache) sweep(now time.Time) {
	c.swept = now
	for k, d := range c.denied {
		if !now.Before(d.Reset) {
			delete(c.denied, k)
		}
	}
}

// Len is how many denials the cache remembers.
func (c *RejectCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.denied)
}
