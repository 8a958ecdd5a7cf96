package stores

import (
	"context"
	"fmt"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// OpenShards has s open every one of its shards now, creating and
// migrating the files that are not there yet, with a read of one key of
// each (a read opens its shard as any call does, and writes no count).
// A process's cold start opens shard 0 alone (Ready), and the others open
// when a call first needs them: this is for a measurement that should
// find no open inside it, and for tests that read every file.
func OpenShards(ctx context.Context, s *sqlite.Store) error {
	n := len(s.Paths())
	p := limiter.Policy{Name: "open", Limit: 1, Window: time.Minute}
	now := time.Now()
	for i, seen := 0, make(map[int]bool); len(seen) < n; i++ {
		key := fmt.Sprint("open-", i)
		shard := sqlite.ShardOf(key, n)
		if seen[shard] {
			continue
		}
		seen[shard] = true
		if _, err := s.Usage(ctx, p, key, now); err != nil {
			return fmt.Errorf("open shard %d: %w", shard, err)
		}
	}
	return nil
}
