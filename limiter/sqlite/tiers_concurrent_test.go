package sqlite_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	var allowed, allowedDefault atomic.Int64
	var wg sync.WaitGroup
	for h := range 3 {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		lim := &limiter.Limiter{Store: s, Policies: []limiter.Policy{p}}
		for g := range 4 {
			wg.Go(func() {
				for j := range 15 {
					tier := []string{"", "pro"}[(h+g+j)%2]
					o, err := lim.Allow(context.Background(), limiter.Request{Key: "k", Tier: tier, At: t0})
					if err != nil {
						t.Error(err)
						return
					}
					if o.Allowed {
						allowed.Add(1)
						if tier == "" {
							allowedDefault.Add(1)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("allowed %d, %d on default", allowed.Load(), allowedDefault.Load())
	if allowed.Load() != 20 || allowedDefault.Load() > 4 {
		t.Errorf("allowed %d (%d default), want 20 and at most 4", allowed.Load(), allowedDefault.Load())
	}
}
