package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// TestGCRATiersAtOneInstantAcrossHandles: twelve clients over three
// handles on one file (three processes' worth), one key, at one instant,
// alternating between a GCRA policy's default tier (burst 4) and pro
// (burst 20). At one instant a bucket only fills, and each decision is
// judged by its own tier's bucket, rescaled: so exactly pro's 20 pass in
// all, and at most 4 of them on the default tier, whatever the order.
func TestGCRATiersAtOneInstantAcrossHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	p := limiter.Policy{Name: "g", Limit: 10, Window: 10 * time.Second, Namespace: "g", Algorithm: limiter.GCRA, Burst: 4,
		Tiers: map[string]limiter.Tier{"pro": {Limit: 100, Burst: 20}}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var stores []limiter.Store
	for range 3 {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	allowed, allowedDefault := storetest.AlternateTiers(t, stores, p, 4, 15, t0)
	t.Logf("allowed %d, %d on default", allowed, allowedDefault)
	if allowed != 20 || allowedDefault > 4 {
		t.Errorf("allowed %d (%d default), want 20 and at most 4", allowed, allowedDefault)
	}
}
