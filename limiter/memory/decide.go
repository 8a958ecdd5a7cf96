package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Allow counts the attempt under each charge and decides it, holding the
// store's mutex from the first read to the audit record: as the SQLite
// store's transaction does, it reads each charge's override and, for a
// sliding window, its previous window's count or, for GCRA, its bucket;
// refuses, counting nothing, an attempt its overrides make impossible;
// adds the cost to each window's counter; decides; moves the GCRA buckets
// the attempt passes; and records an allowed attempt under its first
// charge's key and window.
func (s *Store) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	if err := decide.Validate(a); err != nil {
		return limiter.Outcome{}, fmt.Errorf("memory: %w", err)
	}
	var o decide.Outcome
	err := s.do(ctx, func(t *tables) error {
		o = t.allow(a)
		return nil
	})
	switch {
	case err != nil:
		return limiter.Outcome{}, err
	case o.Refused != nil:
		return limiter.Outcome{}, fmt.Errorf("memory: %w", o.Refused)
	}
	decide.Report(ctx, o)
	return o.Public(), nil
}

// allow is Allow's decision, on t.
func (t *tables) allow(a limiter.Attempt) decide.Outcome {
	// Read everything before counting anything, as the other stores do:
	// two charges of one attempt on one counter see the same previous
	// window and bucket.
	b := a
	b.Charges = make([]limiter.Charge, len(a.Charges))
	states := make([]decide.State, len(a.Charges))
	for i, c := range a.Charges {
		var o *limiter.Override
		states[i], o = t.state(c.Policy, c.Key, a.Now)
		b.Charges[i] = c
		b.Charges[i].Policy = decide.Effective(c, o)
	}
	if err := decide.Impossible(b); err != nil {
		return decide.Outcome{Refused: err}
	}
	for i, c := range b.Charges {
		if c.Policy.Algorithm != limiter.GCRA {
			states[i].Cur = t.count(c, a.Now)
		}
	}
	o := decide.Decide(b, states)
	for i, d := range o.Decisions {
		if d.Moved {
			t.buckets[decide.StoreKey(b.Charges[i].Policy, d.Key)] = bucket{tat: d.TAT.UnixNano(), emission: int64(decide.Emission(d.Policy))}
		}
	}
	if o.Allowed {
		first := a.Charges[0]
		start := decide.WindowStart(a.Now, first.Policy.Window)
		t.audit = append(t.audit, record{
			key:      first.Key,
			window:   decide.FormatWindow(start),
			calledAt: a.Now.UTC().Format(decide.CalledAtLayout),
			route:    a.Route, requestID: a.RequestID, cost: decide.Units(first),
			until: start.Unix() + 2*decide.WindowSeconds(first.Policy),
		})
	}
	t.maybeSweep(a.Now.Unix())
	return o
}

// count adds c's cost to its counter of the window containing now, up to
// decide.CountCap, and returns the count.
func (t *tables) count(c limiter.Charge, now time.Time) int64 {
	w := window{decide.StoreKey(c.Policy, c.Key), decide.WindowStart(now, c.Policy.Window).Unix()}
	n, ok := t.windows[w]
	if !ok {
		n.seconds = decide.WindowSeconds(c.Policy) // the first count's, as a row keeps the window it was inserted with
	}
	// Costs are at most limiter.MaxLimit and the count at most CountCap,
	// so the sum cannot overflow before it is capped.
	if t.longest == nil {
		t.longest = map[string]int64{}
	}
	t.longest[c.Policy.Namespace] = max(t.longest[c.Policy.Namespace], decide.WindowSeconds(c.Policy))
	n.count = min(n.count+decide.Units(c), decide.CountCap)
	t.windows[w] = n
	return n.count
}

// state is what t holds of key under p at now: its count in the window
// containing now (for Usage; Allow counts it afresh), for a sliding policy
// the previous window's count, for GCRA its bucket; and its override.
func (t *tables) state(p limiter.Policy, key string, now time.Time) (decide.State, *limiter.Override) {
	k := decide.StoreKey(p, key)
	start := decide.WindowStart(now, p.Window).Unix()
	st := decide.State{Cur: t.windows[window{k, start}].count}
	switch p.Algorithm {
	case limiter.Sliding:
		st.Prev = t.windows[window{k, start - decide.WindowSeconds(p)}].count
	case limiter.GCRA:
		if b, ok := t.buckets[k]; ok {
			st.TAT, st.Emission = time.Unix(0, b.tat), time.Duration(b.emission)
		}
	}
	return st, t.override(k)
}

// override is the override kept under the store key k, a copy; nil when
// there is none.
func (t *tables) override(k string) *limiter.Override {
	o, ok := t.overrides[k]
	if !ok {
		return nil
	}
	return &o
}

// Usage reads key's standing under p at now, with its override. It writes
// nothing.
func (s *Store) Usage(ctx context.Context, p limiter.Policy, key string, now time.Time) (limiter.Usage, error) {
	if err := decide.TargetAt(p, key, now); err != nil {
		return limiter.Usage{}, fmt.Errorf("memory: %w", err)
	}
	var u limiter.Usage
	err := s.do(ctx, func(t *tables) error {
		st, o := t.state(p, key, now)
		u = decide.Usage(decide.Effective(limiter.Charge{Policy: p}, o), key, now, st)
		return nil
	})
	return u, err
}
