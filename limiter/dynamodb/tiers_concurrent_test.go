package dynamodb_test

import (
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
)

// TestTiersAtOneInstantAcrossHandles: nine clients over three handles on
// one table, one key, at one instant, alternating between a policy's
// default tier and pro: a GCRA policy (bursts 4 and 20), whose bucket only
// fills at one instant, lets at most 20 through, at most 4 of them on the
// default tier; a sliding one (5, pro 12), whose count is every attempt,
// at most 12, at most 5 of them on the default tier. Each decision is
// judged by its own tier, in its own conditional write, however the
// handles race.
func TestTiersAtOneInstantAcrossHandles(t *testing.T) {
	ep := dynamotest.Endpoint(t)
	table := dynamotest.CreateTable(t, ep)
	g := limiter.Policy{Name: "g", Limit: 10, Window: 10 * time.Second, Namespace: "g", Algorithm: limiter.GCRA, Burst: 4,
		Tiers: map[string]limiter.Tier{"pro": {Limit: 100, Burst: 20}}}
	f := limiter.Policy{Name: "f", Limit: 5, Window: time.Hour, Namespace: "f", Algorithm: limiter.Sliding, Tiers: map[string]limiter.Tier{"pro": {Limit: 12}}}
	t0 := time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)
	for _, p := range []limiter.Policy{g, f} {
		stores := []limiter.Store{open(t, ep, table), open(t, ep, table), open(t, ep, table)}
		allowed, allowedDefault := storetest.AlternateTiers(t, stores, p, 3, 10, t0)
		want, wantDefault := int64(20), int64(4)
		if p.Algorithm == limiter.Sliding {
			want, wantDefault = 12, 5
		}
		t.Logf("%s: allowed %d, %d on default", p.Name, allowed, allowedDefault)
		if allowed > want || allowedDefault > wantDefault {
			t.Errorf("%s: allowed %d (%d default), want at most %d and %d", p.Name, allowed, allowedDefault, want, wantDefault)
		}
	}
}
