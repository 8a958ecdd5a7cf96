package limiter_test

import (
	"strings"
	"testing"
	"time"

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
			a := limiter.Attempt{Checks: []limiter.Check{{Policy: p, Key: "k", Cost: tt.cost}}, Now: now}
			d := a.Outcome([]limiter.State{{TAT: tt.tat}}).Decisions[0]
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
		{limiter.Policy{Name: "a", Limit: 1, Window: time.Second, Algorithm: limiter.GCRA, Burst: limiter.MaxBurst + 1}, "burst"},
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
