//go:build !nodynamodb

package stores

import (
	"context"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
)

func init() {
	openers[limiter.StoreDynamoDB] = func(ctx context.Context, cfg limiter.StoreConfig) (limiter.Store, error) {
		s, err := dynamodb.Open(ctx, cfg)
		if s == nil {
			return nil, err
		}
		return s, err
	}
}
