package limiter

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultRejectCacheSize bounds how many denied keys a RejectCache remembers.
const DefaultRejectCacheSize = 10000

// RejectCache is a Store that answers repeat offenders from memory. Once it
// has seen an attempt denied, it denies further attempts with the same keys
// in the same windows itself, without a store round trip, for as long as
// the counts it saw still deny them: until a fixed window ends, or a
// sliding one's weight fades enough. An abusive client, the common case for
// a rate limiter, then costs the shared store about one transaction per
// allowed request plus one per execution environment and window, instead of
// one per attempt.
//
// The price is the design note's "count every attempt": with a RejectCache,
// a stored count is the attempts that reached the store (every allowed one,
// and in each execution environment the first denied one of a window), not
// every attempt. Allowed requests and their audit records are unaffected.
//
// It is safe for simultaneous use by multiple goroutines. Usage, Prune and
// Close go straight to the wrapped store.
type RejectCache struct {
	Store
	size int

	mu     sync.Mutex
	denied map[string]Outcome // by the attempt's keys and windows
	swept  time.Time          // when a full cache last swept, to sweep once a second at most
}

var _ Store = (*RejectCache)(nil)

// NewRejectCache wraps s; it remembers at most size denied attempts at a
// time (DefaultRejectCacheSize when size is not positive), and when full,
// lets new denials through to the store rather than evict live ones.
func NewRejectCache(s Store, size int) *RejectCache {
	if size <= 0 {
		size = DefaultRejectCacheSize
	}
	return &RejectCache{Store: s, size: size, denied: map[string]Outcome{}}
}

// signature names an attempt's checks: each policy's store key and window
// length. It leaves the windows out, so that a denial by a long policy is
// remembered while a short policy beside it moves on to new windows.
func signature(a Attempt) string {
	var b strings.Builder
	for _, c := range a.Checks {
		b.WriteString(c.Policy.StoreKey(c.Key))
		b.WriteByte(0)
		b.WriteString(strconv.FormatInt(c.Policy.WindowSeconds(), 10))
		b.WriteByte(0)
	}
	return b.String()
}

// Allow denies from memory an attempt like one already denied whose counts
// still deny it, and otherwise asks the store, remembering a denial.
//
// The remembered counts carry over as far as they are known: a policy
// still in the window it was denied in has the counts the store returned;
// one that has moved to the next window has that count as its previous
// window's and none in the new one (this process knows of none); one further
// on, none at all. The attempt is denied from memory when those counts
// still deny it under some policy; otherwise the store decides.
func (c *RejectCache) Allow(ctx context.Context, a Attempt) (Outcome, error) {
	sig := signature(a)
	c.mu.Lock()
	prev, ok := c.denied[sig]
	c.mu.Unlock()
	if ok {
		n := len(prev.Decisions)
		cur, before := make([]int64, n), make([]int64, n)
		for i, d := range prev.Decisions {
			switch start := WindowStart(a.Now, a.Checks[i].Policy.Window); {
			case start.Equal(d.WindowStart):
				cur[i], before[i] = d.cur, d.prev
			case start.Equal(d.Reset):
				before[i] = d.cur
			}
		}
		if o := a.Outcome(cur, before); !o.Allowed {
			for i := range o.Decisions {
				o.Decisions[i].FromMemory = true
			}
			return o, nil
		}
	}
	o, err := c.Store.Allow(ctx, a)
	if err != nil || o.Allowed {
		return o, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.denied) >= c.size && a.Now.Sub(c.swept) >= time.Second {
		c.sweep(a.Now)
	}
	if len(c.denied) < c.size {
		c.denied[sig] = o
	}
	return o, nil
}

// sweep forgets denials whose windows have all ended. c.mu is held.
func (c *RejectCache) sweep(now time.Time) {
	c.swept = now
	for k, o := range c.denied {
		live := false
		for _, d := range o.Decisions {
			live = live || now.Before(d.Reset)
		}
		if !live {
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
