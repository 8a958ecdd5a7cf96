// Package rejectcache answers repeat offenders from memory, in front of a
// store (REJECT_CACHE=on): see Cache.
package rejectcache

import (
	"context"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// DefaultSize bounds how many denied keys a Cache remembers.
const DefaultSize = 10000

// Cache is a limiter.Store that answers repeat offenders from memory. Once it
// has seen an attempt denied, it denies further attempts with the same keys
// and no smaller costs itself, without a store round trip, for as long as
// the counts it saw still deny them (until a fixed window ends, a sliding
// one's weight fades enough, a GCRA bucket drains enough) and for at most
// MaxRemembered. An attempt like it that passes through the store (a
// cheaper one) makes it forget the denial: the counts have moved on. Its
// wait is told from the counts it remembers; requests allowed since in
// other processes, or under other routes' policies on the same key, can
// make the true wait longer, and a client back then is denied again by
// the store, with the wait as it is (within MaxRemembered of the denial,
// the cache asks the store anyway). An attempt that its key's policies,
// overrides included, could never let through goes to the store, which
// refuses it. An abusive client, the common case for a rate limiter,
// then costs the shared store about one transaction per allowed request
// plus one per execution environment every MaxRemembered, instead of one
// per attempt.
//
// The price is the design note's "count every attempt": with a Cache,
// a stored count is the attempts that reached the store (every allowed one,
// and in each execution environment the first denied one of a window and
// then one every MaxRemembered, plus those that were already on their way
// to the store when the first denial came back), not every attempt.
// Allowed requests and their audit records are unaffected.
//
// It is safe for simultaneous use by multiple goroutines. Usage, Prune,
// Override and Close go straight to the wrapped store; SetOverride,
// DeleteOverride and Reset do too, and forget what this process remembers
// of the key.
type Cache struct {
	limiter.Store
	size int

	mu     sync.Mutex
	denied map[string]denial // by the attempt's keys and windows
	swept  time.Time         // when a full cache last swept, to sweep once a second at most
	// forgets counts the forgets (an override or reset here): a denial
	// whose store answer was on its way during one may be of the state
	// before it, and is not remembered.
	forgets uint64
	// passes are the last attempt that passed through the store, by
	// slotOf its signature: a denial decided from the counts before it is
	// not remembered (pass.since).
	passes [passSlots]pass
}

// passSlots is how many slots Cache.passes keeps: a pass of another
// signature in a denial's slot while the denial is on its way (a few
// milliseconds) hides the one before it, which only lets a stale denial be
// remembered, as before there were passes; at 5,000 passes a second over
// many keys, about one denial in 400 of those that race a pass.
const passSlots = 4096

// slotOf is sig's slot in Cache.passes.
func slotOf(sig string) int {
	h := fnv.New32a()
	h.Write([]byte(sig))
	return int(h.Sum32() % passSlots)
}

// after reports whether the store decided q, an attempt it let through,
// after it read the counts d was decided from (two attempts of one
// signature): in some charge, q's count (its own included) in the same
// window is higher than d's, or its window later, or the GCRA bucket it
// left later than d's was as d read it. A stale denial is one a pass came
// after; of two passes, the later is the one that came after the other.
func after(q, d decide.Outcome) bool {
	if len(q.Decisions) != len(d.Decisions) {
		return false
	}
	for i, e := range d.Decisions {
		qd := q.Decisions[i]
		switch {
		case e.Policy.Algorithm == limiter.GCRA:
			if qd.TAT.After(e.State().TAT) {
				return true
			}
		case qd.WindowStart.After(e.WindowStart):
			return true
		case qd.WindowStart.Equal(e.WindowStart) && qd.State().Cur > e.State().Cur:
			return true
		}
	}
	return false
}

// pass is an attempt that passed through the store, and what it decided
// from.
type pass struct {
	sig string
	o   decide.Outcome
}

// since reports whether the pass, of signature sig, came after the
// counts that denied was decided from were read (after): a denial decided
// before a cheaper attempt passed tells a wait too short for the counts
// as they are.
func (p pass) since(sig string, denied decide.Outcome) bool {
	return p.sig == sig && after(p.o, denied)
}

// MaxRemembered bounds how long a Cache answers from one denial: an
// override or a reset made in another process (admin API) reaches the
// store, not this process's memory, and so takes effect here within it.
const MaxRemembered = 10 * time.Second

// denial is a remembered denied outcome, with the states it was decided from,, and the instant of its attempt.
type denial struct {
	o  decide.Outcome
	at time.Time
}

var _ limiter.Store = (*Cache)(nil)

// New wraps s; it remembers at most size denied attempts at a
// time (DefaultSize when size is not positive), and when full,
// lets new denials through to the store rather than evict live ones.
func New(s limiter.Store, size int) *Cache {
	if size <= 0 {
		size = DefaultSize
	}
	return &Cache{Store: s, size: size, denied: map[string]denial{}}
}

// signature names an attempt's charges: each policy's store key, window
// length and tier (as decide.TierOf names it: a configured name or none).
// It leaves the windows out, so that a denial by a long policy is
// remembered while a short policy beside it moves on to new windows. The
// tier keeps a key that moved to a bigger tier from being denied by what
// was remembered of its old one.
func signature(a limiter.Attempt) string {
	var b strings.Builder
	for _, c := range a.Charges {
		b.WriteString(decide.StoreKey(c.Policy, c.Key))
		b.WriteByte(0)
		b.WriteString(strconv.FormatInt(decide.WindowSeconds(c.Policy), 10))
		b.WriteByte(0)
		b.WriteString(decide.TierOf(c))
		b.WriteByte(0)
	}
	return b.String()
}

// Allow denies from memory an attempt like one already denied whose counts
// still deny it, and otherwise asks the store, remembering a denial. The
// whole outcome goes to whoever asked for it on ctx (decide.Capture), with
// FromMemory set on a denial from memory.
func (c *Cache) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	sig := signature(a)
	slot := slotOf(sig)
	c.mu.Lock()
	prev, ok := c.denied[sig]
	forgets := c.forgets
	c.mu.Unlock()
	if ok {
		if o, ok := prev.recall(a); ok {
			decide.Report(ctx, o)
			return o.Public(), nil
		}
	}
	inner, whole := decide.Capture(ctx)
	o, err := c.Store.Allow(inner, a)
	if err == nil && o.Allowed {
		// An attempt with these policies and keys passed (a cheaper one):
		// the counts moved on from a denial remembered of them before it,
		// and a wait told from those would be too short. One on its way
		// is checked against this pass when it arrives (pass.since).
		c.mu.Lock()
		if whole.Decisions != nil {
			p := pass{sig: sig, o: *whole}
			if d, ok := c.denied[sig]; ok && p.since(sig, d.o) {
				delete(c.denied, sig)
			}
			// The latest the store decided, not the last to come back:
			// answers may come back out of order.
			if q := c.passes[slot]; q.sig != sig || after(p.o, q.o) {
				c.passes[slot] = p
			}
		}
		c.mu.Unlock()
	}
	if err != nil || o.Allowed || whole.Decisions == nil {
		// Allowed, failed, or decided by a store that tells only what
		// Store.Allow returns: nothing to remember.
		if err == nil && whole.Decisions != nil {
			decide.Report(ctx, *whole)
		}
		return o, err
	}
	decide.Report(ctx, *whole)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgets != forgets || c.passes[slot].since(sig, *whole) {
		return o, nil // decided from the counts before a forget, or a pass
	}
	if len(c.denied) >= c.size && a.Now.Sub(c.swept) >= time.Second {
		c.sweep(a.Now)
	}
	if len(c.denied) < c.size {
		c.denied[sig] = denial{o: *whole, at: a.Now}
	}
	return o, nil
}

// recall decides a from the remembered denial, if it can: the denial is
// younger than MaxRemembered, and every check costs at least what it cost
// then. The remembered counts carry over as far as they are known: a
// policy still in the window it was denied in has the counts the store
// returned; one that has moved to the next window has that count as its
// previous window's and none in the new one (this process knows of none);
// one further on, none at all; a GCRA bucket is where it was, as a denial
// leaves it. The attempt is denied from memory when those counts still
// deny it under some policy; otherwise the store decides.
func (m denial) recall(a limiter.Attempt) (decide.Outcome, bool) {
	if a.Now.Sub(m.at) >= MaxRemembered || a.Now.Before(m.at) {
		return decide.Outcome{}, false
	}
	states := make([]decide.State, len(m.o.Decisions))
	for i, d := range m.o.Decisions {
		if decide.Units(a.Charges[i]) < d.Cost {
			return decide.Outcome{}, false
		}
		switch st, start := d.State(), decide.WindowStart(a.Now, a.Charges[i].Policy.Window); {
		case d.Policy.Algorithm == limiter.GCRA:
			states[i].TAT, states[i].Emission = st.TAT, st.Emission
		case start.Equal(d.WindowStart):
			states[i] = st
		case start.Equal(d.WindowStart.Add(d.Policy.Window)):
			states[i].Prev = st.Cur
		}
	}
	// Decide with the policies as the store applied them (overrides
	// included), at the new attempt's cost.
	b := a
	b.Charges = make([]limiter.Charge, len(a.Charges))
	for i, ch := range a.Charges {
		b.Charges[i] = limiter.Charge{Policy: m.o.Decisions[i].Policy, Key: ch.Key, Cost: ch.Cost, Tier: ch.Tier}
	}
	if decide.Impossible(b) != nil {
		return decide.Outcome{}, false // the store refuses it, with a 400, not a wait
	}
	o := decide.Decide(b, states)
	if o.Allowed {
		return decide.Outcome{}, false
	}
	o.FromMemory = true
	for i := range o.Decisions {
		o.Decisions[i].Moved = false
	}
	return o, true
}

// sweep forgets denials whose windows have all ended, or that are older
// than MaxRemembered. c.mu is held.
func (c *Cache) sweep(now time.Time) {
	c.swept = now
	for k, m := range c.denied {
		live := now.Sub(m.at) < MaxRemembered
		if live {
			live = false
			for _, d := range m.o.Decisions {
				live = live || now.Before(d.WindowStart.Add(d.Policy.Window)) || d.Policy.Algorithm == limiter.GCRA
			}
		}
		if !live {
			delete(c.denied, k)
		}
	}
}

// Len is how many denials the cache remembers.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.denied)
}

// SetOverride sets the override in the store and forgets this process's
// denials of the key under p, so that the next attempt here is decided
// under the new limit, not remembered under the old one. Other processes
// forget theirs within MaxRemembered.
func (c *Cache) SetOverride(ctx context.Context, p limiter.Policy, key string, o limiter.Override) (*limiter.Override, error) {
	defer c.forget(decide.StoreKey(p, key))
	return c.Store.SetOverride(ctx, p, key, o)
}

// DeleteOverride deletes the override in the store and forgets this
// process's denials of the key under p, as SetOverride does.
func (c *Cache) DeleteOverride(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	defer c.forget(decide.StoreKey(p, key))
	return c.Store.DeleteOverride(ctx, p, key)
}

// Reset resets the key's counts in the store and forgets this process's
// denials of it under p, as SetOverride does.
func (c *Cache) Reset(ctx context.Context, p limiter.Policy, key string, now time.Time) error {
	defer c.forget(decide.StoreKey(p, key))
	return c.Store.Reset(ctx, p, key, now)
}

// forget drops every remembered denial of an attempt that counted under
// storeKey. A signature is store keys, window lengths and tiers, each
// ended by a NUL, which no store key holds; a window length or tier that
// reads like the store key only makes it forget more, which is safe.
func (c *Cache) forget(storeKey string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgets++
	for sig := range c.denied {
		if strings.HasPrefix(sig, storeKey+"\x00") || strings.Contains(sig, "\x00"+storeKey+"\x00") {
			delete(c.denied, sig)
		}
	}
}
