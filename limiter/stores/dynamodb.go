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
		if err != nil { // not a nil *dynamodb.Store in a non-nil interface
			return nil, err
		}
		return s, nil
	}
}
