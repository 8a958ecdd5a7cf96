package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/jsonlog"
	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/stores"
)

// BenchmarkServerHandler32Clients measures the local server's handler
// without the network: 32 goroutines, as wrk's 32 connections in the peer
// comparison of BENCHMARKS.md, send GET /ping over 1,000 client keys to the
// handler the server builds (its request timeout, the API, the JSON log
// line by the server's handler, here to io.Discard), on a store in the journal mode of each
// sub-benchmark, or on the memory store, which leaves the handler's own
// work and allocations. It is the comparison's CPU work less net/http's and
// wrk's: a quick way to see what a change saves; the comparison itself is
// tools/peer/run.sh.
func BenchmarkServerHandler32Clients(b *testing.B) {
	for _, mode := range []string{"WAL", "DELETE", "memory"} {
		b.Run(mode, func(b *testing.B) {
			env := map[string]string{
				"DB_PATH": filepath.Join(b.TempDir(), "ratelimit.db"), "JOURNAL_MODE": mode,
				"RATE_LIMIT": "1000000000", "WINDOW_SECONDS": "3600",
			}
			if mode == "memory" {
				env = map[string]string{"STORE": "memory", "RATE_LIMIT": "1000000000", "WINDOW_SECONDS": "3600"}
			}
			cfg, err := readConfig(func(k string) string { return env[k] })
			if err != nil {
				b.Fatal(err)
			}
			log := slog.New(jsonlog.New(io.Discard))
			store, err := stores.OpenReady(context.Background(), cfg.Store, log)
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			opts := envconfig.Service(cfg.Config, store, io.Discard)
			opts.Logger = log
			opts.Routes = []string{service.RoutePing, service.RouteStatus, service.RouteCheck}
			h := newServer(cfg.Addr, lambdatest.NewAPI(b, opts)).Handler
			var next atomic.Int64
			b.SetParallelism((32 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest("GET", "/ping", nil)
					r.Header.Set(service.ClientKeyHeader, fmt.Sprintf("k%04d", next.Add(1)%1000))
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Errorf("status %d: %s", w.Code, w.Body)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
