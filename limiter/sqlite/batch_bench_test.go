package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// BenchmarkBatchOf16 measures one group-commit transaction of 16 decisions
// over 1,000 keys, each with a request's deadline, as the local server's
// batches under the peer comparison of BENCHMARKS.md: the work a shard does
// while other decisions queue for it, which sets the pace in WAL, where no
// fsync does. Its ns/op is per decision.
func BenchmarkBatchOf16(b *testing.B) {
	for _, mode := range []string{"WAL", "DELETE"} {
		b.Run(mode, func(b *testing.B) {
			s, err := Open(context.Background(), Config{Path: filepath.Join(b.TempDir(), "bench.db"), JournalMode: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Ready(context.Background()); err != nil {
				b.Fatal(err)
			}
			policy := limiter.Policy{Name: "ping", Limit: 1 << 40, Window: time.Hour}
			now := time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC)
			sh := s.shards[0]
			batch := make([]*pending, 16)
			cancels := make([]context.CancelFunc, len(batch))
			b.ResetTimer()
			for i := 0; i < b.N; i += len(batch) {
				for j := range batch {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					cancels[j] = cancel
					a := limiter.Attempt{Charges: []limiter.Charge{{Policy: policy, Key: fmt.Sprintf("k%04d", (i+j)%1000)}}, Now: now, Route: "GET /ping", RequestID: "0123456789abcdef"}
					batch[j] = newPending(ctx, a, false)
				}
				if _, err := sh.decideBatch(batch); err != nil {
					b.Fatal(err)
				}
				for _, cancel := range cancels {
					cancel()
				}
			}
		})
	}
}
