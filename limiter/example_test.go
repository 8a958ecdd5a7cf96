package limiter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// A Go backend asks whether its client may proceed, as other services ask
// POST /check: here a batch of 30 items under 100 a minute and 1,000 a day.
// A denial is an outcome, not an error.
func ExampleLimiter_Allow() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "ratelimit.db")})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	lim := &limiter.Limiter{Store: store, Policies: []limiter.Policy{
		{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api"},
		{Name: "daily", Limit: 1000, Window: 24 * time.Hour, Namespace: "daily"},
	}}
	// Now defaults to time.Now; one instant here keeps the output the same.
	lim.Now = func() time.Time { return time.Date(2026, 12, 1, 9, 0, 30, 0, time.UTC) }
	for range 4 {
		o, err := lim.Allow(context.Background(), limiter.Request{Key: "user-42", Cost: 30})
		if err != nil {
			panic(err) // the store failed: answer with your fail mode
		}
		fmt.Println(o.Allowed, o.Decisions[0].Remaining, o.Decisions[1].Remaining)
	}
	// Output:
	// true 70 970
	// true 40 940
	// true 10 910
	// false 0 880
}
