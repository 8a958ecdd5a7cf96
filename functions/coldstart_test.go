//go:build linux

package functions_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
)

var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// BenchmarkColdStart measures what a cold start costs each function, as
// built for Lambda and with -tags nodynamodb (no AWS SDK): the bootstrap's
// size, and the init phase the emulator reports (loading the binary, the
// Go runtime and package initialisation, reading the configuration and
// opening the store), one fresh environment per iteration.
//
//	go test -run '^$' -bench ColdStart -benchtime 20x ./functions/
func BenchmarkColdStart(b *testing.B) {
	for _, fn := range functionNames {
		for _, variant := range []string{fn, fn + "-nodynamodb"} {
			b.Run(variant, func(b *testing.B) {
				fi, err := os.Stat(bin.bootstrap[variant])
				if err != nil {
					b.Fatal(err)
				}
				dir := b.TempDir()
				var total time.Duration
				event := lambdatest.Event(b, "ping.json")
				if fn == "prune" {
					event = lambdatest.Event(b, "prune.json")
				}
				for range b.N {
					e := startEmulator(b, variant, "DB_PATH="+dir+"/rl.db")
					if _, _, err := e.invoke(event); err != nil {
						b.Fatal(err)
					}
					e.stop()
					m := initReport.FindStringSubmatch(e.logs.String())
					if m == nil {
						b.Fatalf("no init report in:\n%s", e.logs)
					}
					ms, _ := strconv.ParseFloat(m[1], 64)
					total += time.Duration(ms * float64(time.Millisecond))
				}
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "init-ms")
				b.ReportMetric(float64(fi.Size())/1e6, "MB")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
