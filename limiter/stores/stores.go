// Package stores opens the store a configuration names: SQLite, the
// default, or DynamoDB.
//
// Each store registers itself from a file of its own, so that a build can
// leave one out: `-tags nodynamodb` drops the DynamoDB store and the AWS SDK
// with it, which keeps a SQLite-only function about 3 MB smaller
// (BENCHMARKS.md, "What the SDK costs").
package stores

import (
	"context"
	"fmt"

	"github.com/ft251/ratelimit/limiter"
)

// openers holds the stores compiled in, by limiter.StoreConfig.Kind.
var openers = map[string]func(context.Context, limiter.StoreConfig) (limiter.Store, error){}

// Open opens cfg's store. As sqlite.Open, it may return both a store and an
// error wrapping limiter.ErrUnavailable: the store is usable and retries
// on each call. A nil store means the error will not pass by itself.
func Open(ctx context.Context, cfg limiter.StoreConfig) (limiter.Store, error) {
	kind := cfg.Kind
	if kind == "" {
		kind = limiter.StoreSQLite
	}
	open, ok := openers[kind]
	if !ok {
		return nil, fmt.Errorf("stores: this build has no %s store (was it built with -tags no%s?)", kind, kind)
	}
	return open(ctx, cfg)
}
