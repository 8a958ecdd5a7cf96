package limiter_test

import (
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// An override valid under a GCRA policy's window when it was set stays in
// the store when the window changes; the policy it makes then must still
// be one GCRA can count, or a fresh key is denied for centuries (a
// tolerance past an int64 of nanoseconds) or the decision divides by zero
// (an emission interval under a nanosecond).
func TestAnOverrideStaysWithinGCRAsBoundsAfterItsPolicyChanges(t *testing.T) {
	windows := []time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour, limiter.MaxWindow}
	overrides := []limiter.Override{
		{Limit: 1}, {Limit: 1, Burst: 1_000_000_000}, {Limit: 10, Burst: 1},
		{Limit: 1_000_000}, {Limit: 2_000_000_000, Burst: 1000}, {Limit: 2_592_000_000, Burst: 1_000_000_000},
	}
	checked := 0
	for _, set := range windows {
		for _, o := range overrides {
			p := limiter.Policy{Name: "tok", Limit: 10, Window: set, Algorithm: limiter.GCRA}
			if o.Validate(p) != nil {
				continue // refused when set: never stored
			}
			for _, now := range windows {
				p.Window = now
				q := p.With(&o)
				if err := q.Validate(); err != nil {
					t.Errorf("override %+v set under a window of %v, applied under %v: %v", o, set, now, err)
				}
				if set == now && (q.Limit != o.Limit || o.Burst != 0 && q.Burst != o.Burst) {
					t.Errorf("override %+v under the window it was set for became limit %d, burst %d", o, q.Limit, q.Burst)
				}
				checked++
			}
		}
	}
	if checked < 60 {
		t.Fatalf("only %d cases were valid when set", checked)
	}
}
