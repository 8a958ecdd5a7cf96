package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// overrides: an override set through one handle changes the next decision
// through another (another process), is what Usage reports, and once
// deleted, the key is back to the policy's limit. A GCRA override changes
// the burst too.
func overrides(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	other := in.Another(t)
	p := limiter.Policy{Name: "api", Limit: 2, Window: time.Hour, Namespace: "api"}
	for i := range 3 {
		allow(t, other, p, "premium_1", t0, fmt.Sprint(i)) // 2 allowed, 1 denied
	}
	before, err := in.Store.SetOverride(ctx, p, "premium_1", limiter.Override{Limit: 5})
	if err != nil || before != nil {
		t.Fatalf("set override = %v, %v; want no previous one", before, err)
	}
	if o, err := other.Override(ctx, p, "premium_1"); err != nil || o == nil || o.Limit != 5 {
		t.Fatalf("override read elsewhere = %+v, %v", o, err)
	}
	if d := allow(t, other, p, "premium_1", t0, "after"); !d.Allowed || d.Policy.Limit != 5 || d.Remaining != 1 {
		t.Errorf("the next decision elsewhere: %+v, want allowed under the limit of 5 with 1 left (4 counted)", d)
	}
	if u, err := other.Usage(ctx, p, "premium_1", t0); err != nil || u.Policy.Limit != 5 {
		t.Errorf("usage = %+v, %v; want the effective limit 5", u, err)
	}
	if d := allow(t, other, p, "someone_else", t0, "x"); d.Policy.Limit != 2 {
		t.Errorf("another key's limit %d, want the policy's 2", d.Policy.Limit)
	}
	before, err = in.Store.SetOverride(ctx, p, "premium_1", limiter.Override{Limit: 10})
	if err != nil || before == nil || before.Limit != 5 {
		t.Errorf("replacing it returned %+v, %v; want the previous limit 5", before, err)
	}
	if before, err := in.Store.DeleteOverride(ctx, p, "premium_1"); err != nil || before == nil || before.Limit != 10 {
		t.Errorf("delete = %+v, %v; want the deleted limit 10", before, err)
	}
	if d := allow(t, other, p, "premium_1", t0, "deleted"); d.Allowed || d.Policy.Limit != 2 {
		t.Errorf("after the delete: %+v, want denied under the policy's 2", d)
	}
	if before, err := in.Store.DeleteOverride(ctx, p, "premium_1"); err != nil || before != nil {
		t.Errorf("deleting again = %+v, %v; want nothing, no error", before, err)
	}
	if o, err := in.Store.Override(ctx, p, "premium_1"); err != nil || o != nil {
		t.Errorf("read after delete = %+v, %v; want none", o, err)
	}
	// GCRA: limit and burst.
	if _, err := in.Store.SetOverride(ctx, gcra, "vip", limiter.Override{Limit: 100, Burst: 8}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if d := allow(t, other, gcra, "vip", t0, fmt.Sprint("v", i)); !d.Allowed || d.Policy.Capacity() != 8 {
			t.Fatalf("vip burst %d: %+v, want allowed with a burst of 8", i+1, d)
		}
	}
	if d := allow(t, other, gcra, "vip", t0, "v9"); d.Allowed || d.ResetAfter != time.Second {
		t.Errorf("past the vip burst: %+v, want denied, retry after 1s (T = 10s / 100, rounded up)", d)
	}
	if _, err := in.Store.SetOverride(ctx, p, "x", limiter.Override{Limit: 5, Burst: 3}); err == nil {
		t.Error("a burst for a fixed-window policy was accepted")
	}
}

// burstOfAnotherAlgorithm: an override set while a policy was GCRA keeps
// its burst in the store; once the policy counts in windows (its algorithm
// changed, its name and so its namespace kept), the override's limit
// applies and its burst does not: a window policy has no burst, and an
// attempt is bounded by its limit. With the burst of 1 applied, an attempt
// of cost 2 under a limit of 20 was refused as one that could never pass.
func burstOfAnotherAlgorithm(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	bucket := limiter.Policy{Name: "api", Limit: 10, Window: time.Minute, Namespace: "api", Algorithm: limiter.GCRA, Burst: 5}
	if _, err := in.Store.SetOverride(ctx, bucket, "alice", limiter.Override{Limit: 20, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	for _, alg := range []limiter.Algorithm{limiter.Fixed, limiter.Sliding} {
		p := limiter.Policy{Name: "api", Limit: 10, Window: time.Minute, Namespace: "api", Algorithm: alg}
		o, err := in.Store.Allow(ctx, limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: "alice", Cost: 2}}, Now: t0, RequestID: string(alg)})
		if err != nil {
			t.Errorf("%s: an attempt of cost 2 under the override's limit of 20: %v, want it decided", alg, err)
			continue
		}
		if d := o.Decisions[0]; !d.Allowed || d.Policy.Limit != 20 || d.Policy.Burst != 0 {
			t.Errorf("%s: %+v, want allowed under a limit of 20 and no burst", alg, d)
		}
		if u, err := in.Store.Usage(ctx, p, "alice", t0); err != nil || u.Policy.Burst != 0 || u.Policy.Limit != 20 {
			t.Errorf("%s: usage = %+v, %v; want the override's limit of 20 and no burst", alg, u, err)
		}
	}
}

// overrideBeyondTheWindow: an override is validated against the policy
// as it was when it was set, and stays when the policy's window changes.
// A burst of a billion at 10 a second was valid (a tolerance of 3 years);
// once the window is a day, the override makes the bucket's tolerance a
// billion days, whose nanoseconds pass an int64. A fresh key's first
// request must still pass: it was denied, told to come back in 2170.
func overrideBeyondTheWindow(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	p := limiter.Policy{Name: "tok", Limit: 10, Window: time.Second, Namespace: "tok", Algorithm: limiter.GCRA}
	if _, err := in.Store.SetOverride(ctx, p, "k", limiter.Override{Limit: 1, Burst: 1_000_000_000}); err != nil {
		t.Fatal(err)
	}
	p.Window = 24 * time.Hour
	if d := allow(t, in.Store, p, "k", t0, "first"); !d.Allowed {
		t.Errorf("a fresh key's first request under a day's window: %+v, want allowed", d)
	}
}

// overrideFasterThanANewWindowAllows: an override's rate was valid under
// the policy's hour (two billion an hour, one every 1.8 µs); once the
// window is a second it would emit more often than GCRA's microsecond, an
// interval that rounds to 0 ns. The key is let in at the fastest rate GCRA
// allows, and told so, rather than failing the decision.
func overrideFasterThanANewWindowAllows(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	p := limiter.Policy{Name: "tok", Limit: 10, Window: time.Hour, Namespace: "tok", Algorithm: limiter.GCRA}
	if _, err := in.Store.SetOverride(ctx, p, "k", limiter.Override{Limit: 2_000_000_000, Burst: 1000}); err != nil {
		t.Fatal(err)
	}
	p.Window = time.Second
	d := allow(t, in.Store, p, "k", t0, "first")
	if !d.Allowed || d.Policy.Limit != 1_000_000 || d.Remaining != 999 {
		t.Errorf("a fresh key's first request under a second's window: %+v, want allowed at 1,000,000 a second with 999 of its burst of 1,000 left", d)
	}
}

// overridesSurvive: pruning forgets expired counters, never overrides.
func overridesSurvive(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	p := limiter.Policy{Name: "api", Limit: 2, Window: time.Minute, Namespace: "api"}
	if _, err := in.Store.SetOverride(ctx, p, "k", limiter.Override{Limit: 7}); err != nil {
		t.Fatal(err)
	}
	allow(t, in.Store, p, "k", t0, "1")
	if _, err := in.Store.SetOverride(ctx, gcra, "g", limiter.Override{Limit: 20}); err != nil {
		t.Fatal(err)
	}
	allow(t, in.Store, gcra, "g", t0, "2")
	in.Expire(t, t0.Add(24*time.Hour), t0.Add(24*time.Hour))
	if count, _ := in.Stored(t, p, "k", t0); count != 0 {
		t.Errorf("expired counter kept: %d", count)
	}
	for _, c := range []struct {
		p     limiter.Policy
		key   string
		limit int64
	}{{p, "k", 7}, {gcra, "g", 20}} {
		if o, err := in.Store.Override(ctx, c.p, c.key); err != nil || o == nil || o.Limit != c.limit {
			t.Errorf("%s override after pruning = %+v, %v; want limit %d", c.p.Name, o, err, c.limit)
		}
	}
}

// reset: resetting a key forgets its current (and previous) window's
// counts, or its GCRA bucket, so its next attempt passes as a fresh key's;
// the audit records stay.
func reset(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	p := limiter.Policy{Name: "api", Limit: 2, Window: time.Minute, Namespace: "api", Algorithm: limiter.Sliding}
	now := t0.Add(70 * time.Second)
	for i := range 3 {
		allow(t, in.Store, p, "k", t0.Add(30*time.Second), fmt.Sprint("prev", i)) // the previous window: full
		allow(t, in.Store, p, "k", now, fmt.Sprint("cur", i))
	}
	if d := allow(t, in.Store, p, "k", now, "before"); d.Allowed {
		t.Fatalf("before the reset: %+v, want denied", d)
	}
	if err := in.Store.Reset(ctx, p, "k", now); err != nil {
		t.Fatal(err)
	}
	if u, err := in.Store.Usage(ctx, p, "k", now); err != nil || u.Count != 0 {
		t.Errorf("usage after reset = %+v, %v; want count 0", u, err)
	}
	if d := allow(t, in.Store, p, "k", now, "after"); !d.Allowed || d.Count != 1 {
		t.Errorf("after the reset: %+v, want allowed as a fresh key's first", d)
	}
	if _, audit := in.Stored(t, p, "k", t0); len(audit) != 2 {
		t.Errorf("%d audit records of the previous window, want its 2: a reset keeps them", len(audit))
	}
	// GCRA.
	for i := range 5 {
		allow(t, in.Store, gcra, "g", t0, fmt.Sprint("g", i))
	}
	if err := in.Store.Reset(ctx, gcra, "g", t0); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if d := allow(t, in.Store, gcra, "g", t0, fmt.Sprint("again", i)); !d.Allowed {
			t.Errorf("after the reset, burst attempt %d: %+v, want allowed", i+1, d)
		}
	}
}

// gcraRescale: a key that used its whole bucket at 10 a minute is given
// 1000 a minute: the 10 emissions its bucket holds back are 10 of the new
// rate, and 989 more pass at once after the next one, where the old TAT
// read at the new rate would hold it back most of a minute. Back at 10 a
// minute, the bucket is at most full, and the wait is the one that is
// true: the TAT written at 1000 a minute (11 emissions of 60 ms) holds
// back 9 of them 120 ms later, and then one more fits: 1 s, rounded up,
// not the 6 s of one slow emission.
func gcraRescale(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	other := in.Another(t)
	p := limiter.Policy{Name: "tokens", Limit: 10, Window: time.Minute, Namespace: "tokens", Algorithm: limiter.GCRA}
	for i := range 10 {
		allow(t, in.Store, p, "k", t0, fmt.Sprint("r", i))
	}
	if d := allow(t, in.Store, p, "k", t0, "full"); d.Allowed {
		t.Fatalf("past the bucket: %+v, want denied", d)
	}
	if _, err := in.Store.SetOverride(ctx, p, "k", limiter.Override{Limit: 1000}); err != nil {
		t.Fatal(err)
	}
	if u, err := other.Usage(ctx, p, "k", t0); err != nil || u.Remaining != 990 {
		t.Errorf("usage after the raise = %+v, %v; want 990 remaining", u, err)
	}
	if d := allow(t, other, p, "k", t0, "raised"); !d.Allowed || d.Remaining != 989 {
		t.Errorf("after the raise: allowed %v, remaining %d; want allowed, 989 left", d.Allowed, d.Remaining)
	}
	if _, err := in.Store.DeleteOverride(ctx, p, "k"); err != nil {
		t.Fatal(err)
	}
	if d := allow(t, other, p, "k", t0, "lowered"); d.Allowed || d.ResetAfter != time.Second {
		t.Errorf("back at 10 a minute: allowed %v, reset after %v; want denied for 1s", d.Allowed, d.ResetAfter)
	}
	if d := allow(t, in.Store, p, "k", t0.Add(time.Second), "waited"); !d.Allowed {
		t.Errorf("back at 10 a minute, 1 s later: %+v, want allowed, as the wait said", d)
	}
}

// loweredOverride: an override that lowers a key's capacity below an
// attempt's cost makes the attempt one that could never pass: the store
// refuses it with ErrInvalidCost, counting nothing under any policy. A
// GCRA policy of a million per 30 days lowered to 1 (T = 30 days) used to
// multiply the cost by T past an int64: the product wrapped negative, and
// a blocked key was let through at any rate.
func loweredOverride(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	tokens := limiter.Policy{Name: "tokens", Limit: 1_000_000, Window: 30 * 24 * time.Hour, Namespace: "tokens", Algorithm: limiter.GCRA}
	api := limiter.Policy{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api"}
	daily := limiter.Policy{Name: "daily", Limit: 1000, Window: 24 * time.Hour, Namespace: "daily"}
	if _, err := in.Store.SetOverride(ctx, tokens, "abuser", limiter.Override{Limit: 1, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Store.SetOverride(ctx, api, "abuser", limiter.Override{Limit: 3}); err != nil {
		t.Fatal(err)
	}
	for i, a := range []limiter.Attempt{
		weighed(tokens, "abuser", 3559, t0, "g"),
		{Charges: []limiter.Charge{{Policy: api, Key: "abuser", Cost: 5}, {Policy: daily, Key: "abuser", Cost: 5}}, Now: t0, Route: "POST /check", RequestID: "w"},
	} {
		for range 3 {
			o, err := in.Store.Allow(ctx, a)
			if !errors.Is(err, limiter.ErrInvalidCost) {
				t.Fatalf("attempt %d over the lowered capacity: %+v, %v; want ErrInvalidCost", i, o, err)
			}
		}
	}
	if u, err := in.Store.Usage(ctx, tokens, "abuser", t0); err != nil || u.Remaining != 1 {
		t.Errorf("the lowered bucket: %+v, %v; want untouched, 1 left", u, err)
	}
	for _, p := range []limiter.Policy{api, daily} {
		if count, audit := in.Stored(t, p, "abuser", t0); count != 0 || len(audit) != 0 {
			t.Errorf("%s counted %d with %d audit records for refused attempts", p.Name, count, len(audit))
		}
	}
	if d := allow(t, in.Store, tokens, "abuser", t0, "one"); !d.Allowed {
		t.Errorf("one request under the lowered bucket: %+v, want allowed", d)
	}
	if d := allow(t, in.Store, tokens, "abuser", t0, "two"); d.Allowed {
		t.Errorf("a second one at the same instant: %+v, want denied", d)
	}
}
