package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
)

// A program that is the only one deciding for its clients counts in its
// own memory: here 3 requests a minute. The third one leaves nothing, so
// the outcome already says when to come back.
func ExampleNew() {
	store := memory.New()
	defer store.Close()

	lim := &limiter.Limiter{Store: store, Policies: []limiter.Policy{
		{Name: "api", Limit: 3, Window: time.Minute},
	}}
	// Now defaults to time.Now; one instant here keeps the output the same.
	lim.Now = func() time.Time { return time.Date(2026, 12, 1, 9, 0, 30, 0, time.UTC) }
	for range 4 {
		o, err := lim.Allow(context.Background(), limiter.Request{Key: "user-42"})
		if err != nil {
			panic(err) // a request that cannot be made, or a closed store
		}
		fmt.Println(o.Allowed, o.Decisions[0].Remaining, o.RetryAfter())
	}
	// Output:
	// true 2 0s
	// true 1 0s
	// true 0 30s
	// false 0 30s
}
