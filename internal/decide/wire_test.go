package decide

import (
	"reflect"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// An outcome written down by one process reads back, in another, as the
// one decided: what callers see, and what each decision was made from
// (the reject cache reads it); one of another version is refused.
func TestAnOutcomeReadsBackAsDecided(t *testing.T) {
	now := time.Date(2026, 12, 2, 18, 0, 0, 123456789, time.UTC)
	p := limiter.Policy{Name: "api", Limit: 10, Window: time.Minute, Algorithm: limiter.Sliding, Namespace: "api",
		Tiers: map[string]limiter.Tier{"pro": {Limit: 100}}}
	g := limiter.Policy{Name: "burst", Limit: 5, Window: time.Second, Algorithm: limiter.GCRA, Burst: 3, Namespace: "b"}
	a := limiter.Attempt{Now: now, Charges: []limiter.Charge{{Policy: p, Key: "k", Tier: "pro", Cost: 2}, {Policy: g, Key: "k"}}}
	o := Decide(a, []State{{Cur: 7, Prev: 40}, {TAT: now.Add(300 * time.Millisecond), Emission: 200 * time.Millisecond}})
	b, err := MarshalOutcome(o)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalOutcome(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Decisions) != 2 || back.Allowed != o.Allowed {
		t.Fatalf("read back %+v, decided %+v", back, o)
	}
	for i := range o.Decisions {
		d, e := o.Decisions[i], back.Decisions[i]
		if !reflect.DeepEqual(d.Decision.Policy, e.Decision.Policy) || d.Count != e.Count || d.Remaining != e.Remaining ||
			!d.Reset.Equal(e.Reset) || !d.WindowStart.Equal(e.WindowStart) || d.ResetAfter != e.ResetAfter || d.Allowed != e.Allowed ||
			d.Cost != e.Cost || d.Tier != e.Tier || !d.TAT.Equal(e.TAT) || d.Moved != e.Moved {
			t.Errorf("decision %d: read back %+v, decided %+v", i, e, d)
		}
		if s, r := d.State(), e.State(); s.Cur != r.Cur || s.Prev != r.Prev || !s.TAT.Equal(r.TAT) || s.Emission != r.Emission {
			t.Errorf("decision %d: state read back %+v, decided from %+v", i, r, s)
		}
	}
	if _, err := UnmarshalOutcome([]byte(`{"v":2,"allowed":true,"decisions":[]}`)); err == nil {
		t.Error("an outcome of version 2 was read")
	}
	if _, err := MarshalOutcome(Outcome{Refused: limiter.ErrInvalidCost}); err == nil {
		t.Error("a refused outcome was written down")
	}
}
