package awslambda_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// benchHandler is the full /ping or /status path as Lambda runs it: a v2
// event through awslambda.HTTP (httpadapter.NewV2 + ProxyWithContext), the
// API, and a store in the given journal mode.
func benchHandler(b *testing.B, mode string) awslambda.HTTPHandler {
	dir := b.TempDir()
	if root := os.Getenv("RATELIMIT_BENCH_DIR"); root != "" { // a latencyfs mount, say
		var err error
		if dir, err = os.MkdirTemp(root, "bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	return newLambdaWith(b, service.Options{
		Store: sqlitetest.Open(b, sqlite.Config{Path: filepath.Join(dir, "bench.db"), JournalMode: mode}),
		Rules: pingRules(limiter.Policy{Name: "ping", Limit: 1 << 40, Window: time.Minute}, limiter.KeySource{Kind: limiter.KeyFromHeader}),
		Now:   time.Now,
		// Logged as in production, into nothing: a buffer would grow with b.N.
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}).handler
}

func benchInvoke(b *testing.B, h awslambda.HTTPHandler, e events.APIGatewayV2HTTPRequest, keys []string, want int) {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "bench"})
	b.ResetTimer()
	for i := range b.N {
		e.Headers["x-client-key"] = keys[i%len(keys)]
		resp, err := h(ctx, e)
		if err != nil || resp.StatusCode != want {
			b.Fatalf("%d %v %s", resp.StatusCode, err, resp.Body)
		}
	}
}

var benchKeys = []string{"client-0", "client-1", "client-2", "client-3", "client-4", "client-5", "client-6", "client-7"}

// BenchmarkPingHandler is one /ping decision end to end, minus the network.
func BenchmarkPingHandler(b *testing.B) {
	for _, mode := range []string{"DELETE", "WAL"} {
		b.Run(mode, func(b *testing.B) {
			e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](b, "ping.json")
			benchInvoke(b, benchHandler(b, mode), e, benchKeys, 200)
		})
	}
}

// BenchmarkStatusHandler is one /status read end to end.
func BenchmarkStatusHandler(b *testing.B) {
	for _, mode := range []string{"DELETE", "WAL"} {
		b.Run(mode, func(b *testing.B) {
			h := benchHandler(b, mode)
			ping := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](b, "ping.json")
			benchInvoke(b, h, ping, []string{"alice"}, 200)
			e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](b, "status.json")
			benchInvoke(b, h, e, []string{"ignored"}, 200)
		})
	}
}
