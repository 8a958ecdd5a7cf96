package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// AlternateTiers decides one key under p at one instant, at, from clients
// goroutines on each of stores (handles on one file or one table, as
// processes would hold), each making each decisions alternating between
// p's default tier and "pro", and returns how many were allowed in all and
// how many of those on the default tier. A store error fails the test.
func AlternateTiers(t *testing.T, stores []limiter.Store, p limiter.Policy, clients, each int, at time.Time) (allowed, onDefault int64) {
	t.Helper()
	var all, def atomic.Int64
	var wg sync.WaitGroup
	for h, s := range stores {
		lim := &limiter.Limiter{Store: s, Policies: []limiter.Policy{p}}
		for c := range clients {
			wg.Go(func() {
				for j := range each {
					tier := []string{"", "pro"}[(h+c+j)%2]
					o, err := lim.Allow(context.Background(), limiter.Request{Key: "k", Tier: tier, At: at})
					if err != nil {
						t.Error(err)
						return
					}
					if o.Allowed {
						all.Add(1)
						if tier == "" {
							def.Add(1)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	return all.Load(), def.Load()
}
