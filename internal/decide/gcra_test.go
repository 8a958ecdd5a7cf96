package decide_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// TestGCRAAnswers: what a GCRA decision tells, from the bucket as read. A
// policy of 6 per minute (T = 10 s) with bursts of 3.
func TestGCRAAnswers(t *testing.T) {
	p := limiter.Policy{Name: "tokens", Limit: 6, Window: time.Minute, Algorithm: limiter.GCRA, Burst: 3}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		tat        time.Time // before the attempt
		cost       int64
		allowed    bool
		remaining  int64
		resetAfter time.Duration
	}{
		{"fresh key", time.Time{}, 1, true, 2, 10 * time.Second},                       // whole again after one emission
		{"the bucket's last", now.Add(20 * time.Second), 1, true, 0, 10 * time.Second}, // nothing left: the next fits in T
		{"full bucket", now.Add(30 * time.Second), 1, false, 0, 10 * time.Second},
		{"half an emission short", now.Add(25 * time.Second), 1, false, 0, 5 * time.Second},
		{"a cost of 2 with 1 left", now.Add(20 * time.Second), 2, false, 1, 10 * time.Second},
		{"a cost beyond the burst", time.Time{}, 4, false, 3, 10 * time.Second},
		{"a TAT long past is a fresh key", now.Add(-time.Hour), 3, true, 0, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: "k", Cost: tt.cost}}, Now: now}
			d := decide.Decide(a, []decide.State{{TAT: tt.tat}}).Decisions[0]
			if d.Allowed != tt.allowed || d.Remaining != tt.remaining || d.ResetAfter != tt.resetAfter {
				t.Errorf("allowed %v, remaining %d, reset after %v; want %v, %d, %v", d.Allowed, d.Remaining, d.ResetAfter, tt.allowed, tt.remaining, tt.resetAfter)
			}
			if d.Count+d.Remaining != p.Capacity() {
				t.Errorf("count %d + remaining %d is not the burst %d", d.Count, d.Remaining, p.Capacity())
			}
			if d.Moved != tt.allowed {
				t.Errorf("moved %v, want %v: only an allowed attempt moves the bucket", d.Moved, tt.allowed)
			}
		})
	}
}

func TestGCRAPoliciesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		p    limiter.Policy
		want string
	}{
		{limiter.Policy{Name: "a", Limit: 2_000_000, Window: time.Second, Algorithm: limiter.GCRA}, "more often than every microsecond"},
		{limiter.Policy{Name: "a", Limit: 1, Window: time.Second, Algorithm: limiter.GCRA, Burst: 1_000_000_001}, "burst"},
		{limiter.Policy{Name: "a", Limit: 1, Window: time.Second, Burst: 2}, "burst applies to the gcra algorithm only"},
		{limiter.Policy{Name: "a", Limit: 1, Window: time.Second, Algorithm: "leaky"}, "not fixed, sliding or gcra"},
	} {
		if err := tc.p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.p, err, tc.want)
		}
	}
	if err := (limiter.Policy{Name: "a", Limit: 10, Window: time.Second, Algorithm: limiter.GCRA}).Validate(); err != nil {
		t.Errorf("a GCRA policy without a burst: %v", err)
	}
}

// TestAChangedRateRescalesTheBucket: a key that used its whole bucket at
// 10 a minute (T = 6 s, the TAT a minute ahead) is given 1000 a minute
// (T = 60 ms). The bucket held back 10 emissions; it now holds back 10 of
// the new rate, and 990 pass at once, as a window's count of 10 under a
// raised limit leaves 990. Read in the old rate's time, the TAT would
// keep the key waiting for most of a minute for one request. Lowered
// again, a bucket is at most full, not the hours its 1000 emissions would
// take at 10 a minute; but until a request moves it, the TAT drains at
// the rate it was written with, so the key is told the wait that is
// true: until it holds back 9 of its 60 ms emissions, 59.46 s, not one
// slow emission (6 s, after which it would be denied again).
func TestAChangedRateRescalesTheBucket(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	slow := limiter.Policy{Name: "tokens", Limit: 10, Window: time.Minute, Algorithm: limiter.GCRA}
	fast := slow.With(&limiter.Override{Limit: 1000})
	full := decide.State{TAT: now.Add(time.Minute), Emission: decide.Emission(slow)}
	d := decide.Decide(limiter.Attempt{Charges: []limiter.Charge{{Policy: fast, Key: "k"}}, Now: now}, []decide.State{full}).Decisions[0]
	if !d.Allowed || d.Remaining != 989 || !d.TAT.Equal(now.Add(11*decide.Emission(fast))) {
		t.Errorf("raised to 1000/min: allowed %v, remaining %d, TAT %v; want allowed, 989 left, TAT 11 emissions ahead", d.Allowed, d.Remaining, d.TAT.Sub(now))
	}
	u := decide.Usage(fast, "k", now, full)
	if u.Remaining != 990 {
		t.Errorf("/status after the raise: %d remaining, want 990", u.Remaining)
	}
	drained := decide.State{TAT: now.Add(time.Minute), Emission: decide.Emission(fast)} // 1000 emissions of 60 ms
	d = decide.Decide(limiter.Attempt{Charges: []limiter.Charge{{Policy: slow, Key: "k"}}, Now: now}, []decide.State{drained}).Decisions[0]
	if d.Allowed || d.ResetAfter != time.Minute {
		t.Errorf("lowered to 10/min: allowed %v, reset after %v; want denied for 1m0s (59.46 s, rounded up)", d.Allowed, d.ResetAfter)
	}
	for _, tc := range []struct {
		at      time.Duration
		allowed bool
	}{{6 * time.Second, false}, {59*time.Second + 450*time.Millisecond, false}, {59*time.Second + 460*time.Millisecond, true}} {
		d := decide.Decide(limiter.Attempt{Charges: []limiter.Charge{{Policy: slow, Key: "k"}}, Now: now.Add(tc.at)}, []decide.State{drained}).Decisions[0]
		if d.Allowed != tc.allowed {
			t.Errorf("lowered, %v later: allowed %v, want %v", tc.at, d.Allowed, tc.allowed)
		}
	}
	if u := decide.Usage(fast, "k", now, full); u.ResetAfter != time.Minute {
		t.Errorf("/status after the raise: whole again in %v, want 1m0s, when the slow TAT has drained", u.ResetAfter)
	}
	// A TAT written with the policy's own rate, or by a store that keeps
	// no rate, is read as it is.
	for _, st := range []decide.State{{TAT: now.Add(time.Minute), Emission: decide.Emission(fast)}, {TAT: now.Add(time.Minute)}} {
		if d := decide.Decide(limiter.Attempt{Charges: []limiter.Charge{{Policy: fast, Key: "k"}}, Now: now}, []decide.State{st}).Decisions[0]; d.Allowed {
			t.Errorf("a full bucket at the policy's own rate (%v): allowed", st.Emission)
		}
	}
}

// TestGCRABoundsKeepTheArithmeticInside: a limit beyond the burst bound
// with no burst set says to set one (not "burst 0"), and a bucket that
// would take more than a century to drain is refused, where its
// nanoseconds would overflow.
func TestGCRABoundsKeepTheArithmeticInside(t *testing.T) {
	for _, tc := range []struct {
		p    limiter.Policy
		want string
	}{
		{limiter.Policy{Name: "a", Limit: 5_000_000_000, Window: 30 * 24 * time.Hour, Algorithm: limiter.GCRA}, "with no burst set, the burst is the limit, 5000000000"},
		{limiter.Policy{Name: "a", Limit: 1, Window: 30 * 24 * time.Hour, Algorithm: limiter.GCRA, Burst: 1300}, "more than a century to drain"},
	} {
		if err := tc.p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.p, err, tc.want)
		}
	}
	if err := (limiter.Policy{Name: "a", Limit: 1, Window: 30 * 24 * time.Hour, Algorithm: limiter.GCRA, Burst: 1200}).Validate(); err != nil {
		t.Errorf("a burst of 1200 months: %v", err)
	}
}
