//go:build linux

package functions_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
)

// BenchmarkManagedInstance invokes the ping function as one managed
// instance at concurrency 16, from 16 clients at once, over 1,000 keys
// that are never denied, and reports decisions/s, the invocations' latency
// percentiles, and how many were refused (503: the store's wait ran out). The database lives in $RATELIMIT_BENCH_DIR when set
// (a latencyfs mount with -allow-other: the emulator runs the function as
// uid 993), else in a temporary directory. $RATELIMIT_BENCH_BOOTSTRAP
// names another ping bootstrap to measure instead (an older build, say),
// so that before and after run the same harness:
//
//	RATELIMIT_BENCH_DIR=/mnt/efsmodel go test -run '^$' -bench ManagedInstance -benchtime 400x ./functions/
func BenchmarkManagedInstance(b *testing.B) {
	const concurrency, keys = 16, 1000
	bootstrap := bin.bootstrap["ping"]
	if p := os.Getenv("RATELIMIT_BENCH_BOOTSTRAP"); p != "" {
		bootstrap = p
	}
	task, dbDir := managedDir(b, bootstrap)
	if root := os.Getenv("RATELIMIT_BENCH_DIR"); root != "" {
		d, err := os.MkdirTemp(root, "managed-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		dbDir = d
	}
	// The function creates the database at its first invocation (below,
	// before the timer): an older build could not open a newer schema.
	dbPath := filepath.Join(dbDir, "ratelimit.db")
	handOver(b, dbDir)
	e := startManaged(b, task, concurrency, "DB_PATH="+dbPath, "RATE_LIMIT=1000000000", "WINDOW_SECONDS="+longWindow)
	event := lambdatest.Event(b, "ping.json")
	events := make([][]byte, keys)
	for i := range events {
		events[i] = withKey(b, event, fmt.Sprint("tenant-", i))
	}
	lat := make([]time.Duration, b.N)
	var refused atomic.Int64 // answered 503: the store's wait ran out
	invoke := func(i int) {
		start := time.Now()
		status, body, err := invokeManaged(e, events[i%keys])
		lat[i] = time.Since(start)
		var resp struct {
			StatusCode int `json:"statusCode"`
		}
		if err != nil || status != 200 || json.Unmarshal(body, &resp) != nil {
			b.Errorf("invocation %d: %d %s %v", i, status, body, err)
		}
		if resp.StatusCode != 200 {
			refused.Add(1)
		}
	}
	for i := range concurrency { // every runtime warm
		invoke(i % b.N)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				invoke(i)
			}
		})
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(lat[b.N/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[b.N*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(refused.Load()), "refused")
	b.ReportMetric(0, "ns/op")
}
