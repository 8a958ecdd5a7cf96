package stores

import (
	"context"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
)

func init() {
	kinds[Memory] = store{
		open:     func(context.Context, Config) (limiter.Store, error) { return memory.New(), nil },
		validate: func(Config) []*FieldError { return nil },
	}
}
