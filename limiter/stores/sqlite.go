package stores

import (
	"context"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

func init() {
	openers[limiter.StoreSQLite] = func(ctx context.Context, cfg limiter.StoreConfig) (limiter.Store, error) {
		s, err := sqlite.Open(ctx, cfg)
		if err != nil { // not a nil *sqlite.Store in a non-nil interface
			return nil, err
		}
		return s, nil
	}
}
