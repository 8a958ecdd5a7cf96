package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// gcra is 10 requests per 10 s sustained (T = 1 s), bursts of 4.
var gcra = limiter.Policy{Name: "tokens", Limit: 10, Window: 10 * time.Second, Namespace: "tokens", Algorithm: limiter.GCRA, Burst: 4}

// gcraBurst: burst attempts at one instant pass and the next is denied with
// Retry-After = ceil(T); after waiting T exactly, one more passes and the
// next is denied again.
func gcraBurst(t *testing.T, h Harness) {
	in := h.New(t)
	p := gcra
	p.Limit, p.Window = 3, 10*time.Second // T = 3.33 s: Retry-After is ceil(T) = 4 s
	now := t0.Add(500 * time.Millisecond)
	for i := range 4 {
		if d := allow(t, in.Store, p, "k", now, fmt.Sprint(i)); !d.Allowed || d.Remaining != int64(3-i) {
			t.Fatalf("burst attempt %d: %+v, want allowed with %d left", i+1, d, 3-i)
		}
	}
	d := allow(t, in.Store, p, "k", now, "over")
	if d.Allowed || d.ResetAfter != 4*time.Second || d.Remaining != 0 {
		t.Errorf("after the burst: allowed %v, retry after %v, remaining %d; want denied, 4s (ceil of T = 3.33s), 0", d.Allowed, d.ResetAfter, d.Remaining)
	}
	later := now.Add(decide.Emission(p))
	if d := allow(t, in.Store, p, "k", later, "after T"); !d.Allowed {
		t.Errorf("T later: %+v, want one more allowed", d)
	}
	if d := allow(t, in.Store, p, "k", later, "and then"); d.Allowed {
		t.Errorf("T later, a second one: %+v, want denied", d)
	}
	u, err := in.Store.Usage(context.Background(), p, "k", later)
	if err != nil || u.Remaining != 0 || u.Count != 4 || u.Policy.Limit != 3 {
		t.Errorf("usage = %+v, %v; want remaining 0, count 4 (the whole burst in use), limit 3", u, err)
	}
}

// gcraSpaced: attempts exactly T apart never fail, however many, and a
// bucket left alone long enough is whole again.
func gcraSpaced(t *testing.T, h Harness) {
	in := h.New(t)
	p := gcra
	p.Limit, p.Window, p.Burst = 10, time.Second, 1 // T = 100 ms, no burst: sub-second precision or nothing
	for i := range 30 {
		at := t0.Add(time.Duration(i) * decide.Emission(p))
		if d := allow(t, in.Store, p, "k", at, fmt.Sprint(i)); !d.Allowed {
			t.Fatalf("attempt %d at +%v: %+v, want allowed", i+1, at.Sub(t0), d)
		}
	}
	if d := allow(t, in.Store, p, "k", t0.Add(29*decide.Emission(p)+decide.Emission(p)/2), "early"); d.Allowed {
		t.Errorf("half an emission early: %+v, want denied", d)
	}
}

// gcraCosts: an attempt of cost c consumes c emissions.
func gcraCosts(t *testing.T, h Harness) {
	in := h.New(t)
	if d := attempt(t, in.Store, weighed(gcra, "k", 3, t0, "three")).Decisions[0]; !d.Allowed || d.Remaining != 1 {
		t.Errorf("cost 3 of a burst of 4: %+v, want allowed with 1 left", d)
	}
	if d := attempt(t, in.Store, weighed(gcra, "k", 2, t0, "two")).Decisions[0]; d.Allowed || d.ResetAfter != time.Second {
		t.Errorf("cost 2 with 1 left: %+v, want denied, retry after 1s (one emission)", d)
	}
	if d := attempt(t, in.Store, weighed(gcra, "k", 2, t0.Add(time.Second), "two later")).Decisions[0]; !d.Allowed || d.Remaining != 0 {
		t.Errorf("cost 2 one emission later: %+v, want allowed with nothing left", d)
	}
	if o, err := in.Store.Allow(context.Background(), weighed(gcra, "k", 5, t0.Add(time.Hour), "beyond")); !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("cost 5 of a burst of 4: %+v, %v; want ErrInvalidCost, even with the bucket whole: it could never pass", o, err)
	}
}

// gcraDenied: a denied attempt does not move the bucket, whichever policy
// denied it: GCRA counts what it lets through, where windows count every
// attempt.
func gcraDenied(t *testing.T, h Harness) {
	in := h.New(t)
	p := gcra
	p.Burst = 1 // one at a time, one a second
	for i := range 5 {
		allow(t, in.Store, p, "k", t0, fmt.Sprint(i)) // one allowed, four denied
	}
	if d := allow(t, in.Store, p, "k", t0.Add(decide.Emission(p)), "T later"); !d.Allowed {
		t.Errorf("T later: %+v, want allowed: the denials did not push the bucket on", d)
	}
	// Denied by a window beside it: the bucket stays where it was.
	tight := limiter.Policy{Name: "ping", Limit: 1, Window: time.Hour}
	both := func(at time.Time, rid string) decide.Outcome {
		return attemptWhole(t, in.Store, limiter.Attempt{Charges: []limiter.Charge{{Policy: tight, Key: "j"}, {Policy: p, Key: "j"}}, Now: at, RequestID: rid})
	}
	if o := both(t0, "first"); !o.Allowed {
		t.Fatalf("first: %+v", o)
	}
	if o := both(t0.Add(decide.Emission(p)), "window denies"); o.Allowed || !o.Decisions[1].Allowed || o.Decisions[1].Moved {
		t.Errorf("denied by the window: %+v, want the bucket allowing but not moved", o.Decisions[1])
	}
	if d := allow(t, in.Store, p, "j", t0.Add(decide.Emission(p)), "bucket alone"); !d.Allowed {
		t.Errorf("the bucket alone, T after its last pass: %+v, want allowed", d)
	}
}

// gcraConcurrent: many handles hammering one key at four times its rate
// never let through more than burst + elapsed / T.
func gcraConcurrent(t *testing.T, h Harness) {
	in := h.New(t)
	p := gcra
	stores := []limiter.Store{in.Store, in.Another(t)}
	var seq atomic.Int64
	var allowed atomic.Int64
	var wg sync.WaitGroup
	const workers, each = 8, 15
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for i := range each {
				at := t0.Add(time.Duration(seq.Add(1)) * decide.Emission(p) / 4)
				o, err := s.Allow(context.Background(), One(p, "hot", at, "", fmt.Sprint(w, "-", i)))
				if err != nil {
					t.Error(err)
					return
				}
				if o.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Duration(workers*each) * decide.Emission(p) / 4
	most := p.Capacity() + int64(elapsed/decide.Emission(p))
	if got := allowed.Load(); got > most || got < p.Capacity() {
		t.Errorf("%d allowed over %v, want from %d (the burst) to %d (burst + elapsed / T)", got, elapsed, p.Capacity(), most)
	}
}
